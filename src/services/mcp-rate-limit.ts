/**
 * The MCP endpoint's limit (spec 8): 120 tool calls per minute per organization, in
 * fixed one-minute windows counted in PostgreSQL so that every replica shares one count
 * (the in-memory RateLimiter of rate-limit.ts counts per replica). One upsert per call.
 */
import { sql } from 'kysely';
import { ApiError } from '../errors/api-error.js';
import type { Db } from '../store/db.js';

export const MCP_TOOL_CALLS_PER_MINUTE = 120;
const WINDOW_MS = 60_000;

/** Counts one tool call of `orgId`; throws 429 `rate-limited` with Retry-After past the limit. */
export async function countMcpToolCall(
  db: Db,
  orgId: string,
  now: Date,
  limit = MCP_TOOL_CALLS_PER_MINUTE,
): Promise<void> {
  const start = new Date(Math.floor(now.getTime() / WINDOW_MS) * WINDOW_MS);
  const { rows } = await sql<{ calls: number }>`
    INSERT INTO mcp_rate_windows (org_id, window_start, calls) VALUES (${orgId}, ${start}, 1)
    ON CONFLICT (org_id, window_start) DO UPDATE SET calls = mcp_rate_windows.calls + 1
    RETURNING calls`.execute(db);
  const calls = rows[0]!.calls;
  // The first call of a window sweeps the organization's past windows: the table stays small.
  if (calls === 1) {
    await db
      .deleteFrom('mcp_rate_windows')
      .where('org_id', '=', orgId)
      .where('window_start', '<', start)
      .execute();
  }
  if (calls > limit) {
    const retryAfter = Math.max(1, Math.ceil((start.getTime() + WINDOW_MS - now.getTime()) / 1000));
    throw new ApiError(
      'rate-limited',
      `More than ${limit} MCP tool calls this minute for the organization; retry in ${retryAfter} s.`,
      {},
      retryAfter,
    );
  }
}
