/**
 * The host-side steps of databases that both requests and jobs run: bringing a database
 * into service, tearing one down, destroying archives no one needs. Each step is
 * idempotent, so a job that reruns it after a crash finishes the work or finds it done.
 */
import { sql } from 'kysely';
import { ApiError } from '../../errors/api-error.js';
import { EngineError } from '../../engines/engine.js';
import type { InstanceRef } from '../../engines/runtime.js';
import type { Executor } from '../../store/db.js';
import type { ServiceContext } from '../context.js';
import { instanceSpec, instancesOf, type DatabaseRow } from './records.js';

/** The services of databases: the store and friends, and `databases`, which runs servers. */
export type DatabaseContext = ServiceContext;

/** Instance as it is written into job payloads: enough to destroy it without its row. */
export type { InstanceRef };

/** The row of a database by id, if it still exists. */
export async function databaseById(ex: Executor, id: string): Promise<DatabaseRow | undefined> {
  return ex.selectFrom('databases').selectAll().where('id', '=', id).executeTakeFirst();
}

/** Hands a ready database to the host: the front pipes to its primary from now on. */
export async function serveDatabase(ctx: DatabaseContext, row: DatabaseRow): Promise<void> {
  const instances = await instancesOf(ctx.db, row.id);
  const primary = instances.find((i) => i.role === 'primary');
  if (!primary) throw new Error(`database ${row.id} has no primary instance`);
  const standby = instances.find((i) => i.role === 'standby');
  await ctx.databases.openFront(row.id, row.kind, row.port);
  await ctx.databases.serve(row.id, {
    primary: await instanceSpec(ctx.db, ctx.box, row, primary),
    ...(standby ? { standby: await instanceSpec(ctx.db, ctx.box, row, standby) } : {}),
    power: row.power,
    policy: row.suspend_policy,
    memoryMb: row.memory_mb,
  });
}

/** Stops and removes instances: their servers, volumes and cgroups. */
export async function destroyInstances(ctx: DatabaseContext, refs: InstanceRef[]): Promise<void> {
  await ctx.databases.destroy(refs);
}

/** Whether a copy or restore that has not ended yet reads the archive. */
export async function archiveBeingRead(ctx: DatabaseContext, archiveId: string): Promise<boolean> {
  const readers = await sql<{ n: number }>`SELECT count(*)::int AS n FROM jobs
    WHERE kind IN ('databases.copy', 'databases.restore') AND state IN ('queued', 'running')
      AND payload->>'archiveId' = ${archiveId}`.execute(ctx.db);
  return (readers.rows[0]?.n ?? 0) > 0;
}

/**
 * Destroys an archive once nothing needs it: its database is gone (or has moved to a
 * newer archive and the archive is no longer the database's) and no copy in progress
 * reads it.
 */
export async function destroyArchiveIfUnused(
  ctx: DatabaseContext,
  archiveId: string,
  /** When given, the archive's files are removed even if its row is gone already. */
  kind?: 'postgres' | 'redis',
): Promise<boolean> {
  const row = await ctx.db
    .selectFrom('database_archives')
    .selectAll()
    .where('id', '=', archiveId)
    .executeTakeFirst();
  if (!row) {
    if (kind) await ctx.databases.destroyArchive(kind, archiveId);
    return true;
  }
  if (row.database_id !== null) return false;
  if (await archiveBeingRead(ctx, archiveId)) return false;
  await ctx.databases.destroyArchive(row.kind, archiveId);
  await ctx.db.deleteFrom('database_archives').where('id', '=', archiveId).execute();
  return true;
}

/** An engine's failure as the answer a client can branch on. */
export function engineFailure(err: unknown, what: string): ApiError {
  if (err instanceof ApiError) return err;
  if (err instanceof EngineError) {
    if (err.code === 'no-space') {
      return new ApiError('no-capacity', `No room on the host for ${what}: ${err.message}`);
    }
    if (err.code === 'as-of-out-of-range' || err.code === 'unsupported') {
      return new ApiError('unprocessable', err.message);
    }
  }
  const message = err instanceof Error ? err.message : String(err);
  return new ApiError('create-failed', `The host could not create ${what}: ${message}`);
}
