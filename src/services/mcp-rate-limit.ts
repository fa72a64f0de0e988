/**
 * The MCP endpoint's limit (spec 8): 120 tool calls per minute per organization, in
 * fixed one-minute windows counted in PostgreSQL so that every replica shares one count
 * (the in-memory RateLimiter of rate-limit.ts counts per replica).
 *
 * Every call is counted in the shared row before it runs, and its place in the window
 * (the count the upsert returned) decides. Calls of one organization that arrive while
 * its upsert is under way wait for the next one and are counted together (`calls + n`,
 * places handed out in order): concurrent calls would otherwise queue on the row's lock,
 * one commit each, which made this count cost more than the tool call it guards.
 */
import { sql } from 'kysely';
import { ApiError } from '../errors/api-error.js';
import type { Db } from '../store/db.js';

/** The limit; the benchmark raises it (the object is read at each call). */
export const MCP_LIMITS = { toolCallsPerMinute: 120 };
const WINDOW_MS = 60_000;

interface Waiter {
  resolve(place: number): void;
  reject(err: unknown): void;
}

/** Per organization and window: the calls waiting for the next upsert. */
interface Queue {
  waiting: Waiter[];
}

// Keyed by database: tests run several platforms in one process.
const queuesOf = new WeakMap<Db, Map<string, Queue>>();

/** Counts one tool call of `orgId`; throws 429 `rate-limited` with Retry-After past the limit. */
export async function countMcpToolCall(
  db: Db,
  orgId: string,
  now: Date,
  limit = MCP_LIMITS.toolCallsPerMinute,
): Promise<void> {
  const start = new Date(Math.floor(now.getTime() / WINDOW_MS) * WINDOW_MS);
  const place = await countIn(db, orgId, start);
  if (place > limit) {
    const retryAfter = Math.max(1, Math.ceil((start.getTime() + WINDOW_MS - now.getTime()) / 1000));
    throw new ApiError(
      'rate-limited',
      `More than ${limit} MCP tool calls this minute for the organization; retry in ${retryAfter} s.`,
      {},
      retryAfter,
    );
  }
}

/** This call's place in the organization's window, once the shared row counts it. */
function countIn(db: Db, orgId: string, start: Date): Promise<number> {
  let queues = queuesOf.get(db);
  if (!queues) queuesOf.set(db, (queues = new Map()));
  const key = `${orgId}@${start.getTime()}`;
  return new Promise((resolve, reject) => {
    const queue = queues.get(key);
    if (queue) {
      queue.waiting.push({ resolve, reject });
      return;
    }
    const fresh: Queue = { waiting: [{ resolve, reject }] };
    queues.set(key, fresh);
    void drain(db, orgId, start, fresh).finally(() => queues.delete(key));
  });
}

/** Upserts the waiting calls in batches until none is left. */
async function drain(db: Db, orgId: string, start: Date, queue: Queue): Promise<void> {
  while (queue.waiting.length > 0) {
    const batch = queue.waiting.splice(0);
    let total: number;
    try {
      // A count needs no flush to disk before the call goes on (synchronous_commit off for
      // this transaction alone): a crash at worst forgets the last moment's calls.
      const { rows } = await sql<{ calls: number }>`
        INSERT INTO mcp_rate_windows (org_id, window_start, calls)
        SELECT ${orgId}, ${start}, ${batch.length}
        FROM (SELECT set_config('synchronous_commit', 'off', true)) AS async_commit
        ON CONFLICT (org_id, window_start)
        DO UPDATE SET calls = mcp_rate_windows.calls + ${batch.length}
        RETURNING calls`.execute(db);
      total = rows[0]!.calls;
    } catch (err) {
      for (const w of batch) w.reject(err);
      continue;
    }
    const first = total - batch.length + 1;
    // The first calls of a window sweep the organization's past windows: the table stays small.
    if (first === 1) {
      await db
        .deleteFrom('mcp_rate_windows')
        .where('org_id', '=', orgId)
        .where('window_start', '<', start)
        .execute()
        .catch(() => undefined);
    }
    batch.forEach((w, i) => w.resolve(first + i));
  }
}
