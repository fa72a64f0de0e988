/**
 * Redis's archive is the timestamped AOF in the instance's own volume, with the
 * generations kept across pier's rewrites (generations.ts). This file holds
 * its range, the check of a moment asked for, and the second a fork is cut at (the flush
 * before a fork is in flush.ts, the cut itself in aof.ts).
 *
 * Granularity: the AOF marks time in whole seconds (`#TS:<unix second>` before the first
 * write of each second). A fork as of `asOf` holds every write up to the END of the
 * second that contains `asOf`: all that was acknowledged up to `asOf` is there, and so
 * may be writes made later in that same second (less than a second after `asOf`), never
 * any of a later second. The end (not the start) is chosen so that a fork "as of now"
 * holds the writes a client just made.
 */
import { EngineError, type ArchiveRange, type ArchiveRef } from '../engine.js';
import { readManifest } from './aof.js';
import { historyChains } from './generations.js';
import type { RedisPaths } from './paths.js';

/** The unix second a fork as of `asOf` is cut after (see the granularity rule above). */
export function cutSecond(asOf: Date): number {
  return Math.floor(asOf.getTime() / 1000);
}

/**
 * The range of the AOF at `paths` (undefined paths: the instance is gone): from the start
 * of its oldest kept generation (generations.ts) to now.
 */
export async function rangeOf(
  paths: RedisPaths | undefined,
  now = new Date(),
): Promise<ArchiveRange> {
  const oldest = paths ? (await historyChains(paths))[0]?.start : undefined;
  return oldest ? { oldest, newest: now } : { newest: now };
}

/**
 * Throws unless the AOF at `paths` can restore `asOf`: 'unsupported' when there is no
 * AOF (the source is not persistent, or gone), 'as-of-out-of-range' for a moment before
 * its base or in the future.
 */
export async function checkRestorable(
  archive: ArchiveRef,
  paths: RedisPaths | undefined,
  asOf: Date,
): Promise<RedisPaths> {
  if (!paths || !(await readManifest(paths.aofDir))) {
    throw new EngineError(
      'unsupported',
      `fork with asOf needs a persistent redis: archive ${archive.id} has no timestamped AOF ` +
        (paths
          ? '(its database was created without persistence)'
          : '(its instance volume is gone)'),
    );
  }
  if (Number.isNaN(asOf.getTime()))
    throw new EngineError('as-of-out-of-range', 'asOf is not a date');
  const now = new Date();
  const range = await rangeOf(paths, now);
  if (asOf > now) {
    throw new EngineError(
      'as-of-out-of-range',
      `${asOf.toISOString()} is in the future; the newest moment is ${now.toISOString()}`,
    );
  }
  if (!range.oldest || asOf < range.oldest) {
    throw new EngineError(
      'as-of-out-of-range',
      `${asOf.toISOString()} is before the oldest moment of archive ${archive.id} ` +
        `(${range.oldest?.toISOString() ?? 'none yet'})`,
    );
  }
  return paths;
}
