/**
 * Per-address limits of the keyless OAuth entrances (spec 8: "per caller address"),
 * counted in PostgreSQL in fixed windows so that every replica shares one count; the
 * same upsert-and-sweep as the MCP endpoint's per-organization count
 * (services/mcp-rate-limit.ts), keyed by any bucket name.
 */
import { sql } from 'kysely';
import { ApiError } from '../errors/api-error.js';
import type { Db } from '../store/db.js';

export interface EntranceLimit {
  limit: number;
  windowMs: number;
}

/** Registration is rare; authorize and token are a person's login and a client's refresh. */
export const OAUTH_LIMITS = {
  register: { limit: 20, windowMs: 60_000 },
  authorize: { limit: 30, windowMs: 60_000 },
  token: { limit: 120, windowMs: 60_000 },
} satisfies Record<string, EntranceLimit>;

/** Counts one hit on `bucket`; throws 429 `rate-limited` with Retry-After past the limit. */
export async function countEntranceHit(
  db: Db,
  bucket: string,
  { limit, windowMs }: EntranceLimit,
  now: Date,
): Promise<void> {
  const start = new Date(Math.floor(now.getTime() / windowMs) * windowMs);
  const { rows } = await sql<{ hits: number }>`
    INSERT INTO entrance_rate_windows (bucket, window_start, hits) VALUES (${bucket}, ${start}, 1)
    ON CONFLICT (bucket, window_start) DO UPDATE SET hits = entrance_rate_windows.hits + 1
    RETURNING hits`.execute(db);
  const hits = rows[0]!.hits;
  // The first hit of a window sweeps the bucket's past windows: the table stays small.
  if (hits === 1) {
    await db
      .deleteFrom('entrance_rate_windows')
      .where('bucket', '=', bucket)
      .where('window_start', '<', start)
      .execute();
  }
  if (hits > limit) {
    const retryAfter = Math.max(1, Math.ceil((start.getTime() + windowMs - now.getTime()) / 1000));
    throw new ApiError(
      'rate-limited',
      `Too many requests from this address; retry in ${retryAfter} s.`,
      {},
      retryAfter,
    );
  }
}
