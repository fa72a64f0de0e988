/**
 * Keeping the host in step with the rows: on start every database is taken back (its
 * front opened on its port, its servers found or started); then, every second, copies
 * whose `expiresAt` passed are deleted, and copies whose job died for good are failed,
 * so that nothing stays `restoring` forever.
 */
import { sql } from 'kysely';
import { failCopy } from './copy-work.js';
import { instanceSpec, instancesOf, type DatabaseRow } from './records.js';
import { removeDatabaseNow } from './remove.js';
import { serveDatabase, type DatabaseContext } from './work.js';
import { everyInterval } from '../ticker.js';

/** Opens every front and serves every ready database of this host. */
export async function takeBackDatabases(ctx: DatabaseContext): Promise<void> {
  const rows = await ctx.db
    .selectFrom('databases')
    .selectAll()
    .where('host', '=', ctx.databases.hostId)
    .execute();
  for (const row of rows) {
    try {
      await ctx.databases.openFront(row.id, row.kind, row.port);
      if (row.state !== 'ready') continue;
      const specs = [];
      for (const inst of await instancesOf(ctx.db, row.id)) {
        specs.push(await instanceSpec(ctx.db, ctx.box, row, inst));
      }
      // Servers that died while pier was down are started again, awake.
      const power = await ctx.databases.takeBack(row.id, row.kind, specs, row.power);
      await serveDatabase(ctx, { ...row, power });
      ctx.log.info({ id: row.id, name: row.name, power }, 'database taken back');
    } catch (err) {
      ctx.log.error({ err, id: row.id, name: row.name }, 'database could not be taken back');
    }
  }
}

/** Deletes every copy whose expiry has passed. */
export async function expireDatabases(ctx: DatabaseContext): Promise<number> {
  const due = await ctx.db
    .selectFrom('databases')
    .select(['org_id', 'name'])
    .where('host', '=', ctx.databases.hostId)
    .where('expires_at', '<=', ctx.clock())
    .execute();
  for (const d of due) {
    await removeDatabaseNow(ctx, d.org_id, d.name)
      .then(() => ctx.log.info({ name: d.name }, 'expired database deleted'))
      .catch((err: unknown) => ctx.log.warn({ err, name: d.name }, 'expired database not deleted'));
  }
  return due.length;
}

/** Databases left `restoring` with no job that could still finish them. */
async function orphanedRestorations(ctx: DatabaseContext): Promise<DatabaseRow[]> {
  const rows = await sql<DatabaseRow>`SELECT d.* FROM databases d
    WHERE d.state = 'restoring' AND d.host = ${ctx.databases.hostId}
      AND NOT EXISTS (SELECT 1 FROM jobs j
        WHERE j.state IN ('queued', 'running') AND j.kind LIKE 'databases.%'
          AND (j.payload->>'databaseId' = d.id
            OR j.payload->'preserved'->>'databaseId' = d.id))`.execute(ctx.db);
  return rows.rows;
}

async function lastJobFor(
  ctx: DatabaseContext,
  id: string,
): Promise<{ kind: string; last_error: string | null } | undefined> {
  const r = await sql<{ kind: string; last_error: string | null }>`SELECT kind, last_error FROM jobs
    WHERE kind LIKE 'databases.%' AND (payload->>'databaseId' = ${id}
      OR payload->'preserved'->>'databaseId' = ${id})
    ORDER BY id DESC LIMIT 1`.execute(ctx.db);
  return r.rows[0];
}

/** Ends every orphaned restoration: copies fail, an in-place restore gives up and keeps its data. */
export async function settleOrphans(ctx: DatabaseContext): Promise<number> {
  const orphans = await orphanedRestorations(ctx);
  for (const row of orphans) {
    const last = await lastJobFor(ctx, row.id);
    const why = last?.last_error ?? 'its work stopped and could not be resumed';
    if (last?.kind === 'databases.finish-create') {
      // A create that never finished: the database never existed for its owner.
      await removeDatabaseNow(ctx, row.org_id, row.name);
    } else if (row.copy_kind) {
      const primary = (await instancesOf(ctx.db, row.id)).find((i) => i.role === 'primary');
      await failCopy(
        ctx,
        {
          databaseId: row.id,
          sourceId: '',
          copyKind: row.copy_kind,
          target: { id: primary?.id ?? '', volume: primary?.volume ?? '', kind: row.kind },
        },
        `The copy could not be made: ${why}`,
      );
    } else {
      await ctx.db
        .updateTable('databases')
        .set({ state: 'ready', state_reason: `The last change did not finish: ${why}` })
        .where('id', '=', row.id)
        .execute();
    }
  }
  return orphans.length;
}

/** Runs expiry and the orphan check every `everyMs`; returns a stopper. */
export function scheduleDatabaseUpkeep(ctx: DatabaseContext, everyMs = 1000): () => void {
  return everyInterval(ctx.log, 'database upkeep', everyMs, () =>
    Promise.all([expireDatabases(ctx), settleOrphans(ctx)]),
  );
}
