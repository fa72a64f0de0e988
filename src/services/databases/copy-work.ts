/**
 * The work of a branch or fork, run by the `databases.copy` job: make the copy's server
 * (a copy-on-write snapshot, or a restore from the archive to a moment), then mark it
 * ready and serve it. A copy that cannot be made ends `failed` with `stateReason`, and
 * its half-made server and volume are removed: it is never left `restoring`.
 */
import { EngineError, type ArchiveRef } from '../../engines/engine.js';
import { enqueue } from '../../jobs/queue.js';
import type { JobContext } from '../../jobs/catalogue.js';
import type { CopyPayload } from './copies.js';
import { instanceSpec, instancesOf, type DatabaseRow } from './records.js';
import {
  databaseById,
  destroyArchiveIfUnused,
  destroyInstances,
  serveDatabase,
  type DatabaseContext,
} from './work.js';

/** A failure that no retry can mend: the copy fails at once. */
export class PermanentCopyError extends Error {}

export function isPermanent(err: unknown): boolean {
  return (
    err instanceof PermanentCopyError ||
    (err instanceof EngineError && err.code !== 'failed' && err.code !== 'no-space')
  );
}

async function primarySpec(ctx: DatabaseContext, row: DatabaseRow) {
  const primary = (await instancesOf(ctx.db, row.id)).find((i) => i.role === 'primary');
  if (!primary) throw new PermanentCopyError(`the database '${row.name}' has no server`);
  return instanceSpec(ctx.db, ctx.box, row, primary);
}

/** Makes the copy's server. Steps are recorded, so a rerun skips what is done. */
export async function makeCopy(
  ctx: DatabaseContext,
  p: CopyPayload,
  step: JobContext['step'],
): Promise<void> {
  const row = await databaseById(ctx.db, p.databaseId);
  if (!row || row.state !== 'restoring') return;
  const target = await primarySpec(ctx, row);
  const source = await databaseById(ctx.db, p.sourceId);
  if (p.copyKind === 'branch') {
    if (!source)
      throw new PermanentCopyError('the source database was deleted before the branch was made');
    const from = await primarySpec(ctx, source);
    await ctx.databases.branch(source.id, row.kind, from, target);
  } else {
    const archive = await ctx.db
      .selectFrom('database_archives')
      .selectAll()
      .where('id', '=', p.archiveId ?? '')
      .executeTakeFirst();
    if (!archive) throw new PermanentCopyError('the archive to fork from is gone');
    const ref: ArchiveRef = {
      id: archive.id,
      ...(archive.source_volume ? { sourceVolume: archive.source_volume } : {}),
    };
    const from = source?.state === 'ready' ? await primarySpec(ctx, source) : undefined;
    // Without asOf the fork is of the moment it runs; the archive needs a base before it.
    const asOf = await step('as-of', async () => {
      if (p.asOf) return p.asOf;
      const range = await ctx.databases.archiveRange(row.kind, ref);
      if (!range.oldest && from && source) {
        await ctx.databases.baseBackup(source.id, row.kind, from);
      }
      return new Date().toISOString();
    });
    // A commit after the moment must reach the archive, or recovery has no place to stop.
    if (from && source && archive.covers_until === null) {
      await ctx.databases.flushArchive(source.id, row.kind, from);
    }
    await ctx.databases.restore(row.kind, ref, new Date(asOf), target);
    await ctx.db
      .updateTable('databases')
      .set({ source_as_of: new Date(asOf) })
      .where('id', '=', row.id)
      .execute();
  }
}

/**
 * Serves a made copy, then marks it ready and queues its first base backup: in this
 * order, so that a client that sees `ready` can connect at once.
 */
export async function finishCopy(ctx: DatabaseContext, databaseId: string): Promise<void> {
  const row = await databaseById(ctx.db, databaseId);
  if (!row || row.state !== 'restoring') return;
  await serveDatabase(ctx, row);
  await ctx.db.transaction().execute(async (tx) => {
    const ready = await tx
      .updateTable('databases')
      .set({ state: 'ready', state_reason: null })
      .where('id', '=', databaseId)
      .where('state', '=', 'restoring')
      .returningAll()
      .executeTakeFirst();
    if (ready?.archive_id) {
      await enqueue(
        tx,
        ctx.jobs,
        'databases.base-backup',
        { databaseId },
        { dedupeKey: databaseId },
      );
    }
  });
}

/** Ends a copy `failed`, removing whatever of its server was made. */
export async function failCopy(ctx: DatabaseContext, p: CopyPayload, reason: string) {
  if (p.target.volume) await destroyInstances(ctx, [p.target]);
  const row = await ctx.db
    .updateTable('databases')
    .set({ state: 'failed', state_reason: reason.slice(0, 1000) })
    .where('id', '=', p.databaseId)
    .where('state', '=', 'restoring')
    .returning(['archive_id'])
    .executeTakeFirst();
  ctx.log.warn({ databaseId: p.databaseId, reason }, 'database copy failed');
  if (!row && p.archiveId) await destroyArchiveIfUnused(ctx, p.archiveId);
}

/**
 * The job's whole run: make, finish, or fail for good. A copy deleted meanwhile has its
 * half-made server removed here, since its delete may have run before the server existed.
 */
export async function runCopyJob(
  ctx: DatabaseContext,
  p: CopyPayload,
  job: Pick<JobContext, 'step' | 'attempt'>,
  maxAttempts: number,
): Promise<void> {
  const row = await databaseById(ctx.db, p.databaseId);
  if (!row) {
    await destroyInstances(ctx, [p.target]);
    if (p.archiveId) await destroyArchiveIfUnused(ctx, p.archiveId);
    return;
  }
  if (row.state !== 'restoring') return;
  try {
    await makeCopy(ctx, p, job.step);
    await finishCopy(ctx, p.databaseId);
  } catch (err) {
    if (isPermanent(err) || job.attempt >= maxAttempts) {
      await failCopy(ctx, p, (err as Error).message ?? String(err));
      return;
    }
    throw err;
  }
  if (p.archiveId) await destroyArchiveIfUnused(ctx, p.archiveId);
}
