/**
 * Which archive a fork or restore reads, and whether the moment asked for is in it. A
 * database's history is one archive per timeline: a restore in place closes the current
 * archive (`covers_until`) and starts a new one, so every archive is a straight line and
 * a moment maps to exactly one of them.
 */
import { ApiError, badRequest } from '../../errors/api-error.js';
import type { ArchiveRef } from '../../engines/engine.js';
import type { DatabaseRow } from './records.js';
import type { DatabaseContext } from './work.js';

export interface PickedArchive {
  id: string;
  ref: ArchiveRef;
}

/**
 * The archive of `source` holding `asOf` (absent: now). Answers 400 for a moment in the
 * future and 422 for one the archives do not reach, with the range that can be had.
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
  const at = asOf ?? now;
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
  if (!range.oldest || asOf < range.oldest) {
    const since = range.oldest
      ? `its oldest moment is ${range.oldest.toISOString()}`
      : 'its first base backup is still being taken; try again in a few seconds';
    throw new ApiError(
      'unprocessable',
      `The archive of '${source.name}' does not reach ${asOf.toISOString()}: ${since}.`,
      range.oldest ? { oldest: range.oldest.toISOString() } : {},
    );
  }
  return { id: row.id, ref };
}
