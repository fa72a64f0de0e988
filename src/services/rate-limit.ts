/**
 * Fixed-window counters for the entrances the spec rate-limits per caller address
 * (login, device code, sign-in) and per organization (shell starts; MCP tool calls are
 * counted in PostgreSQL instead, mcp-rate-limit.ts). Kept in the
 * memory of each replica: a limit is a guard against floods, not state worth a write
 * per request, and behind a balancer each replica enforces its share.
 */
import { ApiError } from '../errors/api-error.js';

export class RateLimiter {
  private readonly windows = new Map<string, { start: number; count: number }>();

  constructor(private readonly now: () => number = Date.now) {}

  /** Counts one hit on `bucket`; throws 429 `rate-limited` with Retry-After past `limit`. */
  hit(bucket: string, limit: number, windowMs: number): void {
    const t = this.now();
    let w = this.windows.get(bucket);
    if (!w || t - w.start >= windowMs) {
      w = { start: t, count: 0 };
      this.windows.set(bucket, w);
      if (this.windows.size > 50_000) this.prune(t, windowMs);
    }
    w.count++;
    if (w.count > limit) {
      const retryAfter = Math.max(1, Math.ceil((w.start + windowMs - t) / 1000));
      throw new ApiError(
        'rate-limited',
        `Too many requests; retry in ${retryAfter} s.`,
        {},
        retryAfter,
      );
    }
  }

  private prune(t: number, windowMs: number): void {
    for (const [k, w] of this.windows) if (t - w.start >= windowMs) this.windows.delete(k);
  }
}

/** Per-address limits of the login entrances (spec 8: "per caller address"). */
export const LOGIN_LIMIT = { limit: 30, windowMs: 60_000 };
