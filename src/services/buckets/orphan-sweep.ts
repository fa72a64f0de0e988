/**
 * The orphan sweep: removes blobs that no row names. A blob is stored before the row that
 * names it commits, so a crash between the two, a commit that failed and whose clean-up
 * failed too, a deletion job that gave up, or a deletion that a power cut undid, leaves bytes
 * that nobody can reach and that still take disk. Every run lists each bucket's blobs older
 * than a grace period (far longer than any write takes from its last byte to its commit)
 * and deletes those that neither an object nor a multipart part names.
 *
 * It runs in every replica, ten minutes after start and then every six hours: deleting an
 * orphan twice is harmless, and a server restarted often still sweeps.
 */
import type { ServiceContext } from '../context.js';
import { everyInterval } from '../ticker.js';

/** How old a blob must be before the sweep may take it for an orphan. */
export const ORPHAN_GRACE_MS = 60 * 60 * 1000;
/** Blob ids looked up per query. */
const BATCH = 500;

export interface OrphanSweepTiming {
  firstAfterMs: number;
  everyMs: number;
}

const DEFAULT_TIMING: OrphanSweepTiming = {
  firstAfterMs: 10 * 60 * 1000,
  everyMs: 6 * 60 * 60 * 1000,
};

/** One sweep over every bucket; answers how many blobs it removed. */
export async function sweepOrphanBlobs(
  ctx: ServiceContext,
  graceMs = ORPHAN_GRACE_MS,
): Promise<number> {
  const cutoff = new Date(ctx.clock().getTime() - graceMs);
  const buckets = await ctx.db.selectFrom('buckets').select('id').execute();
  let removed = 0;
  for (const { id: bucketId } of buckets) {
    let batch: string[] = [];
    for await (const blobId of ctx.blobs.listOlderThan(bucketId, cutoff)) {
      batch.push(blobId);
      if (batch.length < BATCH) continue;
      removed += await removeUnnamed(ctx, bucketId, batch);
      batch = [];
    }
    if (batch.length > 0) removed += await removeUnnamed(ctx, bucketId, batch);
  }
  return removed;
}

/** Deletes the blobs of `blobIds` that no object or part of the bucket names. */
async function removeUnnamed(
  ctx: ServiceContext,
  bucketId: string,
  blobIds: string[],
): Promise<number> {
  const objects = await ctx.db
    .selectFrom('objects')
    .select('blob_id')
    .where('bucket_id', '=', bucketId)
    .where('blob_id', 'in', blobIds)
    .execute();
  const parts = await ctx.db
    .selectFrom('multipart_parts')
    .innerJoin('multipart_uploads', 'multipart_uploads.id', 'multipart_parts.upload_id')
    .select('multipart_parts.blob_id')
    .where('multipart_uploads.bucket_id', '=', bucketId)
    .where('multipart_parts.blob_id', 'in', blobIds)
    .execute();
  const named = new Set([...objects, ...parts].map((r) => r.blob_id));
  let removed = 0;
  for (const blobId of blobIds) {
    if (named.has(blobId)) continue;
    await ctx.blobs.delete(bucketId, blobId);
    removed++;
  }
  if (removed > 0) ctx.log.info({ bucketId, removed }, 'removed orphaned blobs');
  return removed;
}

/** Sweeps after `firstAfterMs`, then every `everyMs`; returns a stopper. */
export function scheduleOrphanSweep(
  ctx: ServiceContext,
  timing: OrphanSweepTiming = DEFAULT_TIMING,
): () => void {
  return everyInterval(
    ctx.log,
    'the orphan sweep',
    timing.everyMs,
    () => sweepOrphanBlobs(ctx),
    timing.firstAfterMs,
  );
}
