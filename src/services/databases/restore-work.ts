/**
 * Restore in place, run by the `databases.restore` job: keep the current state as a
 * branch, restore the archive to the moment into a new instance, then swap it in behind
 * the same front, port and password (clients reconnect to the same URL), and remove the
 * old instance. Until the swap the database keeps serving its current data; a restore
 * that fails leaves it `ready` on that data with `stateReason` saying why.
 */
import type { ArchiveRef, InstanceSpec } from '../../engines/engine.js';
import type { JobContext } from '../../jobs/catalogue.js';
import { enqueue } from '../../jobs/queue.js';
import type { RestorePayload } from './copies.js';
import { failCopy, finishCopy, isPermanent, makeCopy } from './copy-work.js';
import {
  insertArchive,
  insertInstance,
  instanceSpec,
  instancesOf,
  passwordOf,
  type DatabaseRow,
} from './records.js';
import {
  databaseById,
  destroyInstances,
  serveDatabase,
  type DatabaseContext,
  type InstanceRef,
} from './work.js';

async function archiveRef(ctx: DatabaseContext, id: string): Promise<ArchiveRef> {
  const a = await ctx.db
    .selectFrom('database_archives')
    .selectAll()
    .where('id', '=', id)
    .executeTakeFirstOrThrow();
  return { id: a.id, ...(a.source_volume ? { sourceVolume: a.source_volume } : {}) };
}

function nextSpec(ctx: DatabaseContext, row: DatabaseRow, p: RestorePayload): InstanceSpec {
  return {
    id: p.next.id,
    owner: row.id,
    volume: p.next.volume,
    internalPort: p.next.internalPort,
    memoryMb: row.memory_mb,
    sizeGb: row.size_gb,
    password: passwordOf(ctx.box, row),
    ...(p.next.archiveId ? { archive: { id: p.next.archiveId, sourceVolume: p.next.volume } } : {}),
  };
}

/** Puts the restored instance in place of the old ones, in one transaction. Idempotent. */
async function swap(
  ctx: DatabaseContext,
  row: DatabaseRow,
  p: RestorePayload,
): Promise<InstanceRef[]> {
  return ctx.db.transaction().execute(async (tx) => {
    const instances = await instancesOf(tx, row.id);
    if (instances.some((i) => i.id === p.next.id)) {
      return []; // swapped before a crash; the old instances are in the step `replaced`
    }
    const now = new Date();
    if (row.archive_id && p.next.archiveId) {
      if (row.kind === 'postgres') {
        // The old timeline stays readable for forks to moments before the restore.
        await tx
          .updateTable('database_archives')
          .set({ covers_until: now })
          .where('id', '=', row.archive_id)
          .execute();
      } else {
        // Redis history lives in the old instance's volume, which goes with it.
        await tx.deleteFrom('database_archives').where('id', '=', row.archive_id).execute();
      }
      await insertArchive(tx, {
        id: p.next.archiveId,
        orgId: row.org_id,
        databaseId: row.id,
        kind: row.kind,
        sourceVolume: p.next.volume,
      });
    }
    await tx.deleteFrom('database_instances').where('database_id', '=', row.id).execute();
    await insertInstance(tx, {
      id: p.next.id,
      databaseId: row.id,
      role: 'primary',
      volume: p.next.volume,
      internalPort: p.next.internalPort,
    });
    await tx
      .updateTable('databases')
      .set({ archive_id: p.next.archiveId, power: 'running' })
      .where('id', '=', row.id)
      .execute();
    if (row.durability === 'host-redundant') {
      await enqueue(tx, ctx.jobs, 'databases.rebuild-standby', { databaseId: row.id });
    }
    return instances.map((i) => ({ id: i.id, volume: i.volume, kind: row.kind }));
  });
}

export async function runRestoreJob(
  ctx: DatabaseContext,
  p: RestorePayload,
  job: Pick<JobContext, 'step' | 'attempt'>,
  maxAttempts: number,
): Promise<void> {
  const row = await databaseById(ctx.db, p.databaseId);
  const nextRef: InstanceRef = {
    id: p.next.id,
    volume: p.next.volume,
    kind: p.preserved.target.kind,
  };
  if (!row) {
    await destroyInstances(ctx, [nextRef]);
    return;
  }
  if (row.state !== 'restoring') return;
  try {
    // The state before the restore is kept first; without it nothing is overwritten.
    await job.step('preserve', async () => {
      await makeCopy(ctx, p.preserved, job.step);
      await finishCopy(ctx, p.preserved.databaseId);
    });
    const current = (await instancesOf(ctx.db, row.id)).find((i) => i.role === 'primary');
    await job.step('flush', async () => {
      if (!current || current.id === p.next.id) return;
      const spec = await instanceSpec(ctx.db, ctx.box, row, current);
      await ctx.databases.flushArchive(row.id, row.kind, spec);
    });
    await job.step('restore', async () => {
      await ctx.databases.restore(
        row.kind,
        await archiveRef(ctx, p.archiveId),
        new Date(p.asOf),
        nextSpec(ctx, row, p),
      );
    });
    // The instances the swap replaces are recorded before it: its transaction removes
    // their rows, so after a crash between its commit and the record of its step they
    // could no longer be named, and would serve (and fill the pool) for good.
    const replaced = await job.step('replaced', async () =>
      (await instancesOf(ctx.db, row.id))
        .filter((i) => i.id !== p.next.id)
        .map((i): InstanceRef => ({ id: i.id, volume: i.volume, kind: row.kind })),
    );
    const swapped = await job.step('swap', () => swap(ctx, row, p));
    const old = [...replaced, ...swapped.filter((i) => !replaced.some((r) => r.id === i.id))];
    const fresh = (await databaseById(ctx.db, row.id))!;
    await serveDatabase(ctx, fresh);
    await destroyInstances(ctx, old);
    await ctx.db
      .updateTable('databases')
      .set({ state: 'ready', state_reason: null })
      .where('id', '=', row.id)
      .execute();
    if (fresh.archive_id) {
      await enqueue(
        ctx.db,
        ctx.jobs,
        'databases.base-backup',
        { databaseId: row.id },
        { dedupeKey: row.id },
      );
    }
  } catch (err) {
    if (!isPermanent(err) && job.attempt < maxAttempts) throw err;
    const reason = `The restore to ${p.asOf} failed; the database kept its data: ${(err as Error).message}`;
    await destroyInstances(ctx, [nextRef]);
    const kept = await databaseById(ctx.db, p.preserved.databaseId);
    if (kept?.state === 'restoring') await failCopy(ctx, p.preserved, 'the restore failed first');
    await ctx.db
      .updateTable('databases')
      .set({ state: 'ready', state_reason: reason.slice(0, 1000) })
      .where('id', '=', row.id)
      .execute();
  }
}
