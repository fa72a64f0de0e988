import { describe, expect, it } from 'vitest';
import { MAX_ATTEMPTS, MAX_RETRY_AFTER_MS, parseRetryAfter, retryDelayMs } from './schedule.js';

describe('webhook retry schedule', () => {
  it('waits 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h, then gives up', () => {
    const delays = Array.from({ length: MAX_ATTEMPTS }, (_, i) => retryDelayMs(i + 1, 1));
    expect(delays).toEqual([
      5_000,
      300_000,
      1_800_000,
      7_200_000,
      18_000_000,
      36_000_000,
      36_000_000,
      undefined,
    ]);
    expect(retryDelayMs(2, 0.001)).toBe(300);
  });

  it('lets Retry-After push the next attempt later, never earlier, and not past 10 h', () => {
    expect(retryDelayMs(1, 1, 60_000)).toBe(60_000);
    expect(retryDelayMs(2, 1, 1_000)).toBe(300_000);
    expect(retryDelayMs(1, 1, 7 * 86_400_000)).toBe(MAX_RETRY_AFTER_MS);
    expect(retryDelayMs(MAX_ATTEMPTS, 1, 1_000)).toBeUndefined();
  });

  it('reads Retry-After as seconds or an HTTP date', () => {
    const now = Date.parse('2026-11-24T12:00:00Z');
    expect(parseRetryAfter('120', now)).toBe(120_000);
    expect(parseRetryAfter('Tue, 24 Nov 2026 12:01:00 GMT', now)).toBe(60_000);
    expect(parseRetryAfter('Tue, 24 Nov 2026 11:00:00 GMT', now)).toBe(0);
    expect(parseRetryAfter('soon', now)).toBeUndefined();
    expect(parseRetryAfter(null, now)).toBeUndefined();
  });
});
