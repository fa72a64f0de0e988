/**
 * Which archive a fork or restore reads, and whether the moment asked for is in it. A
 * database's history is one archive per timeline: a restore in place closes the current
 * archive (`covers_until`) and starts a new one, so every archive is a straight line and
 * a moment maps to exactly one of them.
 */
import { ApiError, badRequest } from '../../errors/api-error.js';
import type { ArchiveRef } from '../../engines/engine.js';
import type { DatabaseRow } from './records.js';
import { archiveBeingRead, type DatabaseContext } from './work.js';

/** The start of the point-in-time window: moments before it are neither kept nor restored. */
export function windowStart(ctx: DatabaseContext): Date {
  return new Date(ctx.clock().getTime() - ctx.config.pitrWindowDays * 86_400_000);
}

export interface PickedArchive {
  id: string;
  ref: ArchiveRef;
}

/**
 * The archive of `source` holding `asOf` (absent: now). Answers 400 for a moment in the
 * future and 422 for one the archives do not reach or that is before the point-in-time
 * window (`pitrWindowDays`), with the oldest moment that can be had.
 */
export async function pickArchive(
  ctx: DatabaseContext,
  source: DatabaseRow,
  asOf: Date | undefined,
): Promise<PickedArchive> {
  const now = ctx.clock();
  if (asOf && asOf.getTime() > now.getTime()) {
    throw badRequest([{ path: 'asOf', message: `is in the future (now is ${now.toISOString()})` }]);
  }
  if (!source.archive_id) {
    const why = source.ephemeral
      ? 'it is an ephemeral branch, which keeps no archive'
      : 'it is not persistent (a Redis without persistence keeps no history)';
    throw new ApiError(
      'unprocessable',
      `The database '${source.name}' cannot be restored from its archive: ${why}. A branch copies it as it is now.`,
    );
  }
  const archives = await ctx.db
    .selectFrom('database_archives')
    .selectAll()
    .where('database_id', '=', source.id)
    .orderBy('created_at')
    .execute();
  // A moment before the window is refused below, naming the oldest one: the window's
  // start, or the start of the archive holding it when that archive begins later.
  const start = windowStart(ctx);
  const at = asOf ? (asOf < start ? start : asOf) : now;
  const row =
    archives.find((a) => a.covers_until !== null && at <= a.covers_until) ??
    archives.find((a) => a.id === source.archive_id);
  if (!row) throw new Error(`database ${source.id} has no archive row`);
  const ref: ArchiveRef = {
    id: row.id,
    ...(row.source_volume ? { sourceVolume: row.source_volume } : {}),
  };
  if (!asOf) return { id: row.id, ref };
  const range = await ctx.databases.archiveRange(source.kind, ref);
  // The archive may still hold a little more (pruning keeps the base before the window's
  // start), but what is restorable is the window: the same answer whenever pruning ran.
  const oldest = range.oldest && (range.oldest < start ? start : range.oldest);
  if (!oldest || asOf < oldest) {
    const since = !oldest
      ? 'its first base backup is still being taken; try again in a few seconds'
      : oldest === start
        ? `history is kept for ${ctx.config.pitrWindowDays} days, so its oldest moment is ${oldest.toISOString()}`
        : `its oldest moment is ${oldest.toISOString()}`;
    throw new ApiError(
      'unprocessable',
      `The archive of '${source.name}' does not reach ${asOf.toISOString()}: ${since}.`,
      oldest ? { oldest: oldest.toISOString() } : {},
    );
  }
  return { id: row.id, ref };
}

/** Whether a copy or restore in progress reads `archiveId` (then it is left alone). */
/**
 * Keeps the history of `databaseId` to the point-in-time window: a closed archive (a
 * timeline a restore in place left) that ends before the window's start is destroyed with
 * its row; every other archive loses what only moments before the window's start need.
 * An archive a copy or restore in progress reads is left for the next time. Idempotent:
 * run after each base backup, and again after a crash.
 */
export async function pruneHistory(ctx: DatabaseContext, databaseId: string): Promise<void> {
  const before = windowStart(ctx);
  const archives = await ctx.db
    .selectFrom('database_archives')
    .selectAll()
    .where('database_id', '=', databaseId)
    .orderBy('created_at')
    .execute();
  for (const a of archives) {
    if (await archiveBeingRead(ctx, a.id)) continue;
    if (a.covers_until !== null && a.covers_until < before) {
      await ctx.databases.destroyArchive(a.kind, a.id);
      await ctx.db.deleteFrom('database_archives').where('id', '=', a.id).execute();
      continue;
    }
    const ref: ArchiveRef = {
      id: a.id,
      ...(a.source_volume ? { sourceVolume: a.source_volume } : {}),
    };
    await ctx.databases.pruneArchive(databaseId, a.kind, ref, before);
  }
}
