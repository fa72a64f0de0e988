/**
 * Reading and changing databases (spec 4.3): list and get (never a URL), PATCH of the
 * sleep policy and a copy's expiry, and the one-time URL of a copy.
 */
import { ApiError, badRequest } from '../../errors/api-error.js';
import {
  connectionUrl,
  findDatabase,
  instancesByDatabase,
  instancesOf,
  normalizePolicy,
  passwordOf,
  toRecord,
} from './records.js';
import type { DatabaseRecord, UpdateResourceBody } from '../../contracts/databases.js';
import type { DatabaseContext } from './work.js';

export async function listDatabases(
  ctx: DatabaseContext,
  orgId: string,
): Promise<DatabaseRecord[]> {
  const rows = await ctx.db
    .selectFrom('databases')
    .selectAll()
    .where('org_id', '=', orgId)
    .orderBy('name')
    .execute();
  const instances = await instancesByDatabase(
    ctx.db,
    rows.map((r) => r.id),
  );
  return rows.map((r) => toRecord(r, instances.get(r.id) ?? []));
}

export async function getDatabase(
  ctx: DatabaseContext,
  orgId: string,
  name: string,
): Promise<DatabaseRecord> {
  const row = await findDatabase(ctx.db, orgId, name);
  return toRecord(row, await instancesOf(ctx.db, row.id));
}

/**
 * Changes the sleep policy, or sets, moves or clears the expiry of a copy. Only copies
 * expire: an original database is never deleted by a clock (409 not-a-copy).
 */
export async function updateDatabase(
  ctx: DatabaseContext,
  orgId: string,
  name: string,
  body: UpdateResourceBody,
): Promise<DatabaseRecord> {
  const now = ctx.clock();
  let expiresAt: Date | null | undefined;
  if (body.ttlSeconds !== undefined) expiresAt = new Date(now.getTime() + body.ttlSeconds * 1000);
  else if (body.expiresAt === null) expiresAt = null;
  else if (body.expiresAt !== undefined) {
    expiresAt = new Date(body.expiresAt);
    if (expiresAt <= now)
      throw badRequest([{ path: 'expiresAt', message: 'must be in the future' }]);
  }
  const row = await ctx.db.transaction().execute(async (tx) => {
    const current = await findDatabase(tx, orgId, name, { lock: true });
    if (expiresAt !== undefined && !current.copy_kind) {
      throw new ApiError(
        'not-a-copy',
        `The database '${name}' is neither a fork nor a branch; only copies expire.`,
      );
    }
    const changes = {
      ...(expiresAt !== undefined ? { expires_at: expiresAt } : {}),
      ...(body.suspendPolicy
        ? { suspend_policy: JSON.stringify(normalizePolicy(body.suspendPolicy)) }
        : {}),
    };
    // An empty body changes nothing (an UPDATE without columns is not valid SQL).
    if (Object.keys(changes).length === 0) return current;
    return tx
      .updateTable('databases')
      .set(changes)
      .where('id', '=', current.id)
      .returningAll()
      .executeTakeFirstOrThrow();
  });
  if (body.suspendPolicy) await ctx.databases.setPolicy(row.id, row.suspend_policy);
  return toRecord(row, await instancesOf(ctx.db, row.id));
}

/**
 * The connection URL of a copy, handed out exactly once: a copy's password exists nowhere
 * else a person can read it, so whoever asks first holds it, and every later ask is 409.
 */
export async function handOutCopyUrl(
  ctx: DatabaseContext,
  orgId: string,
  name: string,
): Promise<{ name: string; url: string }> {
  return ctx.db.transaction().execute(async (tx) => {
    const row = await findDatabase(tx, orgId, name, { lock: true });
    if (!row.copy_kind) {
      throw new ApiError(
        'not-a-copy',
        `The database '${name}' is neither a fork nor a branch; its URL was given when it was created.`,
      );
    }
    if (row.state !== 'ready') {
      throw new ApiError(
        'not-ready',
        row.state === 'failed'
          ? `The copy '${name}' failed: ${row.state_reason ?? 'no reason recorded'}.`
          : `The copy '${name}' is still restoring; ask again once it is ready.`,
      );
    }
    if (row.url_handed_out_at) {
      throw new ApiError(
        'url-handed-out',
        `The URL of '${name}' was handed out at ${row.url_handed_out_at.toISOString()}.`,
      );
    }
    await tx
      .updateTable('databases')
      .set({ url_handed_out_at: ctx.clock() })
      .where('id', '=', row.id)
      .execute();
    return { name, url: connectionUrl(ctx.config.publicUrl, row, passwordOf(ctx.box, row)) };
  });
}
