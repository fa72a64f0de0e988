/**
 * API keys (spec 2.1, 4.1, 5): minting, listing, revocation. The key value is shown once;
 * only its SHA-256 is stored.
 */
import { sql } from 'kysely';
import type { CreateKeyBody, KeyRecord } from '../contracts/tokens.js';
import { ApiError, badRequest, notFound, type ValidationIssue } from '../errors/api-error.js';
import { mintSecret, newId } from '../crypto/tokens.js';
import type { Executor } from '../store/db.js';
import type { AgentBlock } from '../store/schema.js';
import type { ServiceContext } from './context.js';

export const KEY_KIND = 'pier';

export interface KeyRow {
  id: string;
  org_id: string;
  user_id: string | null;
  name: string;
  prefix: string;
  scopes: string[] | null;
  expires_at: Date | null;
  agent: AgentBlock | null;
  created_at: Date;
  last_used_at: Date | null;
}

const KEY_COLUMNS = [
  'id',
  'org_id',
  'user_id',
  'name',
  'prefix',
  'scopes',
  'expires_at',
  'agent',
  'created_at',
  'last_used_at',
] as const;

export function toKeyRecord(row: KeyRow, now: Date): KeyRecord {
  const rec: KeyRecord = {
    id: row.id,
    orgId: row.org_id,
    name: row.name,
    prefix: row.prefix,
    createdAt: row.created_at.toISOString(),
  };
  if (row.user_id) rec.userId = row.user_id;
  if (row.last_used_at) rec.lastUsedAt = row.last_used_at.toISOString();
  if (row.scopes) rec.scopes = row.scopes;
  if (row.expires_at) {
    rec.expiresAt = row.expires_at.toISOString();
    rec.expired = row.expires_at.getTime() <= now.getTime();
  }
  if (row.agent) rec.agent = row.agent;
  return rec;
}

/** Who creates a key: the org it will belong to, the person, and the creator's own expiry. */
export interface KeyCreator {
  orgId: string;
  userId: string | null;
  expiresAt: Date | null;
}

/** Works out the expiry of a new key, refusing one that would outlast its creator. */
function expiryFor(body: CreateKeyBody, creator: KeyCreator, now: Date): Date | null {
  const issues: ValidationIssue[] = [];
  let expiresAt: Date | null = null;
  if (body.ttlSeconds !== undefined) expiresAt = new Date(now.getTime() + body.ttlSeconds * 1000);
  if (body.expiresAt !== undefined) {
    expiresAt = new Date(body.expiresAt);
    if (expiresAt.getTime() <= now.getTime())
      issues.push({ path: 'expiresAt', message: 'must be in the future' });
  }
  const field = body.ttlSeconds !== undefined ? 'ttlSeconds' : 'expiresAt';
  if (creator.expiresAt && (!expiresAt || expiresAt > creator.expiresAt)) {
    issues.push({
      path: field,
      message: `may not outlast the creating key, which expires at ${creator.expiresAt.toISOString()}`,
    });
  }
  if (issues.length) throw badRequest(issues);
  return expiresAt;
}

export interface MintOptions {
  console?: boolean;
}

/** Inserts a key and returns its record plus the value, which exists only in this answer. */
export async function mintKey(
  ex: Executor,
  now: Date,
  creator: KeyCreator,
  body: CreateKeyBody,
  opts: MintOptions = {},
): Promise<KeyRecord & { token: string }> {
  const expiresAt = expiryFor(body, creator, now);
  const secret = mintSecret(KEY_KIND);
  const row = await ex
    .insertInto('api_keys')
    .values({
      id: newId('tok'),
      org_id: creator.orgId,
      user_id: creator.userId,
      name: body.name,
      prefix: secret.prefix,
      hash: secret.hash,
      scopes: body.scopes ?? null,
      expires_at: expiresAt,
      agent: body.agent ? JSON.stringify(body.agent) : null,
      console: opts.console ?? false,
      created_at: now,
    })
    .returning(KEY_COLUMNS)
    .executeTakeFirstOrThrow();
  const rec = toKeyRecord(row, now);
  delete rec.expired;
  return { ...rec, token: secret.value };
}

/** A listed key without `expired`, which depends on the moment of the answer. */
type ListedKey = { record: KeyRecord; expiresAtMs: number | null };

export async function listKeys(ctx: ServiceContext, orgId: string): Promise<KeyRecord[]> {
  // Listings are served from a short-lived cache that every key change invalidates: the
  // route is hot (CLIs and consoles poll it) and its rows change rarely.
  const listed = await ctx.auth.keyListing<ListedKey[]>(orgId, async () => {
    const rows = await ctx.db
      .selectFrom('api_keys')
      .select(KEY_COLUMNS)
      .where('org_id', '=', orgId)
      .where('revoked_at', 'is', null)
      .orderBy('created_at')
      .orderBy('id')
      .execute();
    return rows.map((r) => {
      const record = toKeyRecord(r, new Date(0));
      delete record.expired;
      return { record, expiresAtMs: r.expires_at?.getTime() ?? null };
    });
  });
  const now = ctx.clock().getTime();
  return listed.map(({ record, expiresAtMs }) =>
    expiresAtMs === null ? record : { ...record, expired: expiresAtMs <= now },
  );
}

/** Marks a key revoked; its hash stays so that the key can never come back. */
export async function revokeKey(ctx: ServiceContext, orgId: string, id: string): Promise<void> {
  const res = await ctx.db
    .updateTable('api_keys')
    .set({ revoked_at: ctx.clock() })
    .where('id', '=', id)
    .where('org_id', '=', orgId)
    .where('revoked_at', 'is', null)
    .executeTakeFirst();
  if (res.numUpdatedRows === 0n) throw notFound('Key');
  await ctx.auth.keyRevoked(id, orgId);
}

/** Records the last use of many keys at once (flushed in batches by the authenticator). */
export async function touchKeys(ex: Executor, uses: Map<string, Date>): Promise<void> {
  if (uses.size === 0) return;
  const ids = [...uses.keys()];
  const times = ids.map((id) => uses.get(id)!.toISOString());
  await sql`UPDATE api_keys k SET last_used_at = u.at
    FROM unnest(${ids}::text[], ${times}::timestamptz[]) AS u(id, at)
    WHERE k.id = u.id AND (k.last_used_at IS NULL OR k.last_used_at < u.at)`.execute(ex);
}

export function assertNotAgent(agent: AgentBlock | null): void {
  if (agent) throw new ApiError('agent-token-credential');
}
