/**
 * Failed console sign-ins per browser address (an IPv6 /64 counts as one address,
 * host/address-key.ts): after 10 failures in 10 minutes an address is refused (429 `rate-limited`, `Retry-After`) until its window ends, even with the right
 * password, so a password cannot be guessed from one address faster than that.
 *
 * The counters live in this process's memory, like the API's per-address limits
 * (services/rate-limit.ts): with one replica that is the whole truth; behind a balancer
 * each replica holds its own share, so the bound is per replica. A successful sign-in
 * does not reset the count (it would let a guesser interleave a known account).
 */
import { ApiError } from '../errors/api-error.js';
import { addressLimitKey } from '../host/address-key.js';

export const FAILED_SIGN_IN_LIMIT = { limit: 10, windowMs: 10 * 60_000 };

export class FailedSignIns {
  private readonly windows = new Map<string, { start: number; count: number }>();

  constructor(
    private readonly limit = FAILED_SIGN_IN_LIMIT.limit,
    private readonly windowMs = FAILED_SIGN_IN_LIMIT.windowMs,
    private readonly now: () => number = Date.now,
  ) {}

  /** Throws 429 when `address` has used up its failures in the current window. */
  check(address: string): void {
    const w = this.current(addressLimitKey(address));
    if (w && w.count >= this.limit) {
      const retryAfter = Math.max(1, Math.ceil((w.start + this.windowMs - this.now()) / 1000));
      throw new ApiError(
        'rate-limited',
        `Too many failed sign-ins from this address; retry in ${retryAfter} s.`,
        {},
        retryAfter,
      );
    }
  }

  failed(address: string): void {
    const key = addressLimitKey(address);
    const w = this.current(key) ?? { start: this.now(), count: 0 };
    w.count++;
    this.windows.set(key, w);
    if (this.windows.size > 50_000) this.prune();
  }

  private current(address: string) {
    const w = this.windows.get(address);
    return w && this.now() - w.start < this.windowMs ? w : undefined;
  }

  private prune(): void {
    for (const [k, w] of this.windows) {
      if (this.now() - w.start >= this.windowMs) this.windows.delete(k);
    }
  }
}
