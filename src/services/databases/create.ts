/**
 * Creating a database (spec 4.3): the rows commit first (name claimed, password sealed,
 * a backstop job queued), then the server is made from the engine's template and
 * started, and only then is the row marked ready and the URL answered, once. A crash in
 * between leaves a row the backstop job finishes or removes: never a half-made database.
 */
import { newId, randomBase62 } from '../../crypto/tokens.js';
import { ApiError } from '../../errors/api-error.js';
import { enqueue } from '../../jobs/queue.js';
import { claimName, isReserved, nameAvailability } from '../names.js';
import { assertOrgRoom } from '../org-limits.js';
import {
  connectionUrl,
  insertArchive,
  insertInstance,
  instanceSpec,
  normalizePolicy,
  toRecord,
  type DatabaseRow,
  type InstanceRow,
} from './records.js';
import type { CreateResourceBody, DatabaseRecord } from '../../contracts/databases.js';
import { engineFailure, serveDatabase, type DatabaseContext } from './work.js';
import { removeDatabaseNow } from './remove.js';

/** Volume names say which engine owns them, so an operator can tell them apart. */
export function volumeFor(kind: 'postgres' | 'redis', instanceId: string): string {
  return `${kind === 'postgres' ? 'pg' : 'rd'}-${instanceId.replace(/^dbi-/, '')}`;
}

export const DEFAULT_MEMORY_MB = 256;
export const DEFAULT_SIZE_GB = 10;
/** How long the backstop waits before finishing a create that its request did not. */
const BACKSTOP_DELAY_MS = 60_000;

/** Answers a taken or reserved name before any host work is done. */
export async function assertNameFree(ctx: DatabaseContext, orgId: string, name: string) {
  if (isReserved(name)) {
    throw new ApiError('name-reserved', `The name '${name}' is reserved by the platform.`);
  }
  if (await nameAvailability(ctx.db, orgId, name)) {
    throw new ApiError('name-taken', `The name '${name}' is already used on the platform.`);
  }
}

/** Below this much free space the pool counts as full: no new database is placed. */
export const POOL_RESERVE_BYTES = 256 * 1024 ** 2;

/**
 * Answers 503 no-capacity when the pool is full. Volumes are thin (a quota is a ceiling,
 * not a reservation), so the pool is full when its free space falls below a reserve.
 */
export async function assertPoolRoom(ctx: DatabaseContext): Promise<void> {
  const usage = await ctx.databases.capacity();
  if (usage.freeBytes < POOL_RESERVE_BYTES) {
    const mb = (n: number) => `${Math.floor(n / 1024 ** 2)} MB`;
    throw new ApiError(
      'no-capacity',
      `The host's storage pool is full (${mb(usage.freeBytes)} free of ${mb(usage.totalBytes)}).`,
    );
  }
}

/** Opens a front for a new database, or answers 503 no-capacity when no port is left. */
export async function reserveFront(ctx: DatabaseContext, id: string, kind: DatabaseRow['kind']) {
  await assertPoolRoom(ctx);
  const port = await ctx.databases.openFront(id, kind);
  if (port === undefined) {
    throw new ApiError(
      'no-capacity',
      `Every database port of this host (${ctx.config.databasePorts}) is in use.`,
    );
  }
  return port;
}

export async function createDatabase(
  ctx: DatabaseContext,
  orgId: string,
  body: CreateResourceBody,
): Promise<DatabaseRecord & { url: string }> {
  await assertNameFree(ctx, orgId, body.name);
  const id = newId('db');
  const instanceId = newId('dbi');
  const persistent = body.persistent ?? body.kind === 'postgres';
  const redundant = body.durability === 'host-redundant';
  const password = randomBase62(32);
  // A host-redundant database holds a standby of the same size: it counts twice.
  const servers = redundant ? 2 : 1;
  const adds = {
    databases: 1,
    memoryMb: (body.memoryMb ?? DEFAULT_MEMORY_MB) * servers,
    storageGb: (body.sizeGb ?? DEFAULT_SIZE_GB) * servers,
  };
  // Refused before any host work; the locked count in the transaction decides.
  await assertOrgRoom(ctx.db, orgId, adds, { lock: false });
  const port = await reserveFront(ctx, id, body.kind);
  let row: DatabaseRow;
  let instances: InstanceRow[];
  try {
    const internalPort = await ctx.databases.internalPort();
    const sealed = ctx.box.seal(password, `database:${id}`);
    const archiveId = persistent ? newId('arc') : null;
    ({ row, instances } = await ctx.db.transaction().execute(async (tx) => {
      await assertOrgRoom(tx, orgId, adds);
      await claimName(tx, orgId, body.name, 'database');
      const row = await tx
        .insertInto('databases')
        .values({
          id,
          org_id: orgId,
          name: body.name,
          kind: body.kind,
          host: ctx.databases.hostId,
          port,
          memory_mb: body.memoryMb ?? DEFAULT_MEMORY_MB,
          size_gb: body.sizeGb ?? DEFAULT_SIZE_GB,
          persistent,
          flush_interval_s: body.flushIntervalS ?? null,
          durability: redundant ? 'host-redundant' : 'standard',
          locale: body.locale ?? null,
          suspend_policy: JSON.stringify(normalizePolicy(body.suspendPolicy ?? {})),
          // Restoring until the server answers; the answer says ready (spec: default ready).
          state: 'restoring',
          password_nonce: sealed.nonce,
          password_ciphertext: sealed.ciphertext,
          archive_id: archiveId,
          created_at: ctx.clock(),
        })
        .returningAll()
        .executeTakeFirstOrThrow();
      if (archiveId) {
        await insertArchive(tx, {
          id: archiveId,
          orgId,
          databaseId: id,
          kind: body.kind,
          sourceVolume: volumeFor(body.kind, instanceId),
        });
      }
      const primary = await insertInstance(tx, {
        id: instanceId,
        databaseId: id,
        role: 'primary',
        volume: volumeFor(body.kind, instanceId),
        internalPort,
      });
      await enqueue(
        tx,
        ctx.jobs,
        'databases.finish-create',
        { databaseId: id },
        { runAt: new Date(Date.now() + BACKSTOP_DELAY_MS) },
      );
      return { row, instances: [primary] };
    }));
  } catch (err) {
    await ctx.databases.forget(id);
    throw err;
  }

  try {
    row = await finishCreate(ctx, row, instances, body.locale);
  } catch (err) {
    await removeDatabaseNow(ctx, orgId, body.name).catch((cleanup: unknown) =>
      ctx.log.error({ err: cleanup, id }, 'failed create not cleaned up; the backstop job will'),
    );
    throw engineFailure(err, `the database '${body.name}'`);
  }
  const all = await ctx.db
    .selectFrom('database_instances')
    .selectAll()
    .where('database_id', '=', id)
    .execute();
  return { ...toRecord(row, all), url: connectionUrl(ctx.config.publicUrl, row, password) };
}

/**
 * Provisions the primary (and the standby of a redundant database), marks the row ready,
 * serves it, and queues its first base backup. Idempotent: the backstop job runs it again.
 */
export async function finishCreate(
  ctx: DatabaseContext,
  row: DatabaseRow,
  instances: InstanceRow[],
  locale: string | null | undefined,
): Promise<DatabaseRow> {
  const primaryRow = instances.find((i) => i.role === 'primary');
  if (!primaryRow) throw new Error(`database ${row.id} has no primary instance`);
  const primary = await instanceSpec(ctx.db, ctx.box, row, primaryRow);
  await ctx.databases.create(row.kind, primary, locale ? { locale } : {});
  if (row.durability === 'host-redundant') {
    let standbyRow = instances.find((i) => i.role === 'standby');
    if (!standbyRow) {
      const standbyId = newId('dbi');
      standbyRow = await insertInstance(ctx.db, {
        id: standbyId,
        databaseId: row.id,
        role: 'standby',
        volume: volumeFor(row.kind, standbyId),
        internalPort: await ctx.databases.internalPort(),
      });
    }
    const standby = await instanceSpec(ctx.db, ctx.box, row, standbyRow);
    await ctx.databases.createStandby(row.id, row.kind, primary, standby);
  }
  // Served first, then marked ready: whoever sees `ready` can connect at once.
  await serveDatabase(ctx, row);
  return ctx.db.transaction().execute(async (tx) => {
    const ready = await tx
      .updateTable('databases')
      .set({ state: 'ready', state_reason: null })
      .where('id', '=', row.id)
      .returningAll()
      .executeTakeFirstOrThrow();
    if (ready.archive_id) {
      await enqueue(
        tx,
        ctx.jobs,
        'databases.base-backup',
        { databaseId: row.id },
        { dedupeKey: row.id },
      );
    }
    return ready;
  });
}
