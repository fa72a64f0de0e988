/**
 * Deleting a database (spec 4.3 DELETE, expiry, a failed create): one transaction removes
 * the row (its instances by cascade), its attachments and their managed secrets, frees
 * the name, and queues a destroy job carrying everything the host must remove. The
 * request then runs the same destroy at once; the job is the backstop that finishes it
 * if this process dies first. Nothing is left: no process, front, volume or cgroup.
 */
import { enqueue } from '../../jobs/queue.js';
import { releaseName } from '../names.js';
import { findDatabase, instancesOf } from './records.js';
import {
  destroyArchiveIfUnused,
  destroyInstances,
  type DatabaseContext,
  type InstanceRef,
} from './work.js';

export interface DestroyPayload {
  databaseId: string;
  instances: InstanceRef[];
  archives: string[];
}

const BACKSTOP_DELAY_MS = 30_000;

/** Removes the database of `orgId` named `name`; 404 when there is none. */
export async function removeDatabaseNow(
  ctx: DatabaseContext,
  orgId: string,
  name: string,
): Promise<void> {
  const payload = await ctx.db.transaction().execute(async (tx) => {
    const row = await findDatabase(tx, orgId, name, { lock: true });
    const instances = await instancesOf(tx, row.id);
    const archives = await tx
      .selectFrom('database_archives')
      .select('id')
      .where('database_id', '=', row.id)
      .execute();
    const attachments = await tx
      .selectFrom('database_attachments')
      .select(['app_id', 'secret_name'])
      .where('database_id', '=', row.id)
      .execute();
    for (const a of attachments) {
      await tx
        .deleteFrom('secrets')
        .where('app_id', '=', a.app_id)
        .where('name', '=', a.secret_name)
        .execute();
    }
    // Archives lose their owner (ON DELETE SET NULL) and go once no copy reads them.
    await tx.deleteFrom('databases').where('id', '=', row.id).execute();
    await releaseName(tx, orgId, name);
    const payload: DestroyPayload = {
      databaseId: row.id,
      instances: instances.map((i) => ({ id: i.id, volume: i.volume, kind: row.kind })),
      archives: archives.map((a) => a.id),
    };
    await enqueue(tx, ctx.jobs, 'databases.destroy', payload, {
      runAt: new Date(Date.now() + BACKSTOP_DELAY_MS),
    });
    return payload;
  });
  // The database is gone for its owner once the transaction commits; if the host side
  // fails now, the destroy job finishes it, so the answer stays a success.
  await destroyDatabaseRuntime(ctx, payload).catch((err: unknown) =>
    ctx.log.warn({ err, databaseId: payload.databaseId }, 'database teardown left to its job'),
  );
}

/** The host half of a delete. Idempotent: the destroy job runs it again. */
export async function destroyDatabaseRuntime(
  ctx: DatabaseContext,
  p: DestroyPayload,
): Promise<void> {
  await ctx.databases.forget(p.databaseId);
  await destroyInstances(ctx, p.instances);
  for (const id of p.archives) await destroyArchiveIfUnused(ctx, id);
  await ctx.databases.releaseIdentity(p.databaseId, p.archives);
}
