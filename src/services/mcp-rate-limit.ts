/**
 * The MCP endpoint's limit (spec 8): 120 tool calls per minute per organization, in
 * fixed one-minute windows counted in PostgreSQL so that every replica shares one count
 * (the in-memory RateLimiter of rate-limit.ts counts per replica).
 *
 * A query per call cost more than the tool call it guards, so a replica *leases* places:
 * one upsert adds k to the organization's window (`calls = calls + k`) and the places
 * among the k that fall within the limit are this replica's to hand out locally, without
 * a query, until they are used. k follows the organization's recent rate on this replica
 * (about LEASE_TARGET_MS of its calls, at least the calls waiting, at most 1/8 of the
 * limit and never more than the replica last saw left), so an organization that calls
 * rarely leases one place at a time and a busy one a query every second or two.
 *
 * The trade-off: the limit is never exceeded, across any number of replicas, since every
 * place handed out was granted by the shared row; but it can be under-used, because a
 * replica's unspent places expire with their window (at most 1/8 of the limit per
 * replica, far less for a client that calls at the limit's own pace). `calls` counts the
 * places asked for, so it can pass the limit: the places beyond it are refused.
 * Once a lease comes back short the window is full, and this replica answers 429 without
 * asking again until the next window.
 */
import { sql } from 'kysely';
import { performance } from 'node:perf_hooks';
import { ApiError } from '../errors/api-error.js';
import type { Db } from '../store/db.js';

/** The limit; the benchmark raises it (the object is read at each call). */
export const MCP_LIMITS = { toolCallsPerMinute: 120 };
const WINDOW_MS = 60_000;
/** A lease aims to cover this much of the organization's traffic on this replica. */
const LEASE_TARGET_MS = 2_000;
/** The largest lease, as a share of the limit: what one replica may leave unused. */
const MAX_LEASE_SHARE = 1 / 8;
/** Past this many organizations, the states of past windows are dropped. */
const SWEEP_AT = 1_000;

interface Waiter {
  now: Date;
  resolve(): void;
  reject(err: unknown): void;
}

/** This replica's share of one organization's window. */
interface WindowLease {
  start: number;
  /** Places leased from the shared row and not yet handed out. */
  remaining: number;
  /** The row's count as the last lease saw it. */
  seen: number;
  /** The shared window has no place left. */
  full: boolean;
  leasing: boolean;
  waiting: Waiter[];
}

/** Per organization: its current window's lease and the size and time of its last lease. */
interface OrgState {
  lease: WindowLease;
  last?: { at: number; size: number };
}

// Keyed by database: tests run several platforms (replicas) in one process.
const statesOf = new WeakMap<Db, Map<string, OrgState>>();

/**
 * Counts one tool call of `orgId`; throws (or rejects with) 429 `rate-limited` with
 * Retry-After past the limit. Answers nothing at all when a leased place admits the call
 * at once, so the common case costs no promise.
 */
export function countMcpToolCall(
  db: Db,
  orgId: string,
  now: Date,
  limit = MCP_LIMITS.toolCallsPerMinute,
): Promise<void> | undefined {
  const start = Math.floor(now.getTime() / WINDOW_MS) * WINDOW_MS;
  const state = stateOf(db, orgId, start);
  const lease = state.lease;
  if (lease.remaining > 0 && lease.waiting.length === 0) {
    lease.remaining--;
    return undefined;
  }
  if (lease.full && !lease.leasing) throw limited(limit, now);
  return new Promise((resolve, reject) => {
    lease.waiting.push({ now, resolve, reject });
    if (!lease.leasing) {
      lease.leasing = true;
      void drain(db, orgId, state, lease, limit);
    }
  });
}

function stateOf(db: Db, orgId: string, start: number): OrgState {
  let states = statesOf.get(db);
  if (!states) statesOf.set(db, (states = new Map()));
  let state = states.get(orgId);
  if (!state) {
    if (states.size >= SWEEP_AT) {
      for (const [org, s] of states)
        if (s.lease.start < start && !s.lease.leasing) states.delete(org);
    }
    states.set(orgId, (state = { lease: freshLease(start) }));
  } else if (state.lease.start !== start) {
    // A lease still under way for the past window keeps its own object and finishes there.
    state.lease = freshLease(start);
  }
  return state;
}

function freshLease(start: number): WindowLease {
  return { start, remaining: 0, seen: 0, full: false, leasing: false, waiting: [] };
}

function limited(limit: number, now: Date): ApiError {
  const end = Math.floor(now.getTime() / WINDOW_MS) * WINDOW_MS + WINDOW_MS;
  const retryAfter = Math.max(1, Math.ceil((end - now.getTime()) / 1000));
  return new ApiError(
    'rate-limited',
    `More than ${limit} MCP tool calls this minute for the organization; retry in ${retryAfter} s.`,
    {},
    retryAfter,
  );
}

/** How many places to ask for: the organization's recent pace, within the bounds above. */
function leaseSize(state: OrgState, lease: WindowLease, limit: number, at: number): number {
  const max = Math.max(1, Math.floor(limit * MAX_LEASE_SHARE));
  const last = state.last;
  // The pace since the last lease, grown at most fourfold a lease: one quick burst does not
  // claim a large share at once.
  const paced = last
    ? Math.min(4 * last.size, Math.ceil((last.size * LEASE_TARGET_MS) / Math.max(1, at - last.at)))
    : 1;
  const wanted = Math.max(paced, lease.waiting.length);
  return Math.max(1, Math.min(wanted, max, limit - lease.seen));
}

/** Hands out places to the waiting calls, leasing more from the shared row as needed. */
async function drain(
  db: Db,
  orgId: string,
  state: OrgState,
  lease: WindowLease,
  limit: number,
): Promise<void> {
  try {
    while (lease.waiting.length > 0) {
      if (lease.remaining > 0) {
        const admitted = lease.waiting.splice(0, lease.remaining);
        lease.remaining -= admitted.length;
        for (const w of admitted) w.resolve();
        continue;
      }
      if (lease.full) {
        for (const w of lease.waiting.splice(0)) w.reject(limited(limit, w.now));
        return;
      }
      await leaseMore(db, orgId, state, lease, limit);
    }
  } catch (err) {
    for (const w of lease.waiting.splice(0)) w.reject(err);
  } finally {
    // In the same step as the loop's last check: a call arriving after it starts a new drain.
    lease.leasing = false;
  }
}

/** One lease: asks the shared row for k places and keeps those within the limit. */
async function leaseMore(
  db: Db,
  orgId: string,
  state: OrgState,
  lease: WindowLease,
  limit: number,
): Promise<void> {
  const at = performance.now();
  const k = leaseSize(state, lease, limit, at);
  const total = await upsert(db, orgId, new Date(lease.start), k);
  state.last = { at, size: k };
  const before = total - k;
  lease.remaining += Math.max(0, Math.min(k, limit - before));
  lease.seen = total;
  lease.full = total >= limit;
  // The first lease of a window sweeps the organization's past windows: the table stays small.
  if (before === 0) await sweep(db, orgId, new Date(lease.start));
}

/** Adds `k` places asked for to the organization's window; answers the new count. */
async function upsert(db: Db, orgId: string, start: Date, k: number): Promise<number> {
  // A count needs no flush to disk before the call goes on (synchronous_commit off for
  // this transaction alone): a crash at worst forgets the last moment's leases.
  const { rows } = await sql<{ calls: number }>`
    INSERT INTO mcp_rate_windows (org_id, window_start, calls)
    SELECT ${orgId}, ${start}, ${k}
    FROM (SELECT set_config('synchronous_commit', 'off', true)) AS async_commit
    ON CONFLICT (org_id, window_start)
    DO UPDATE SET calls = mcp_rate_windows.calls + ${k}
    RETURNING calls`.execute(db);
  return rows[0]!.calls;
}

async function sweep(db: Db, orgId: string, start: Date): Promise<void> {
  await db
    .deleteFrom('mcp_rate_windows')
    .where('org_id', '=', orgId)
    .where('window_start', '<', start)
    .execute()
    .catch(() => undefined);
}
