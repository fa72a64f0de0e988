/**
 * Fixed-window counters for the entrances the spec rate-limits per caller address
 * (login, device code, sign-in) and per organization (shell starts; MCP tool calls are
 * counted in PostgreSQL instead, mcp-rate-limit.ts). Kept in the
 * memory of each replica: a limit is a guard against floods, not state worth a write
 * per request, and behind a balancer each replica enforces its share.
 */
import { ApiError } from '../errors/api-error.js';

export class RateLimiter {
  // Each window keeps its own length: buckets of different limits share the map.
  private readonly windows = new Map<string, { start: number; count: number; ms: number }>();

  constructor(private readonly now: () => number = Date.now) {}

  /** Counts one hit on `bucket`; throws 429 `rate-limited` with Retry-After past `limit`. */
  hit(bucket: string, limit: number, windowMs: number): void {
    this.count(bucket, windowMs);
    this.check(bucket, limit + 1, windowMs);
  }

  /**
   * Throws 429 `rate-limited` with Retry-After when `bucket` already has `limit` hits in
   * its window; counts nothing (entrances that count only failures ask this first).
   */
  check(bucket: string, limit: number, windowMs: number): void {
    const t = this.now();
    const w = this.windows.get(bucket);
    if (!w || t - w.start >= windowMs || w.count < limit) return;
    const retryAfter = Math.max(1, Math.ceil((w.start + windowMs - t) / 1000));
    throw new ApiError(
      'rate-limited',
      `Too many requests; retry in ${retryAfter} s.`,
      {},
      retryAfter,
    );
  }

  /** Counts one hit on `bucket`, judging nothing. */
  count(bucket: string, windowMs: number): void {
    const t = this.now();
    let w = this.windows.get(bucket);
    if (!w || t - w.start >= windowMs) {
      w = { start: t, count: 0, ms: windowMs };
      this.windows.set(bucket, w);
      if (this.windows.size > 50_000) this.prune(t);
    }
    w.count++;
  }

  private prune(t: number): void {
    for (const [k, w] of this.windows) if (t - w.start >= w.ms) this.windows.delete(k);
  }
}

/** Per-address limits of the login entrances (spec 8: "per caller address"). */
export const LOGIN_LIMIT = { limit: 30, windowMs: 60_000 };
