/** Password hashing keeps to its share of the thread pool, however many checks arrive. */
import { describe, expect, it } from 'vitest';
import {
  SCRYPT_CONCURRENCY,
  SCRYPT_QUEUE,
  hashPassword,
  scryptLoad,
  verifyPassword,
} from './password.js';

describe('password hashing', () => {
  it('verifies the right password and refuses others', async () => {
    const stored = await hashPassword('correct horse battery');
    expect(await verifyPassword('correct horse battery', stored)).toBe(true);
    expect(await verifyPassword('wrong', stored)).toBe(false);
    expect(await verifyPassword('anything', null)).toBe(false);
  });

  it('runs at most SCRYPT_CONCURRENCY hashes at once and refuses past the queue', async () => {
    const stored = await hashPassword('correct horse battery');
    let peak = 0;
    const watch = setInterval(() => (peak = Math.max(peak, scryptLoad().running)), 1);
    const checks = Array.from({ length: 12 }, (_, i) => verifyPassword(`guess ${i}`, stored));
    expect(scryptLoad()).toEqual({ running: SCRYPT_CONCURRENCY, waiting: 12 - SCRYPT_CONCURRENCY });
    expect(await Promise.all(checks)).toEqual(Array(12).fill(false));
    clearInterval(watch);
    expect(peak).toBeLessThanOrEqual(SCRYPT_CONCURRENCY);
    expect(scryptLoad()).toEqual({ running: 0, waiting: 0 });

    // A flood beyond the queue is answered at once, not queued behind the others.
    const flood = Array.from({ length: SCRYPT_CONCURRENCY + SCRYPT_QUEUE + 5 }, () =>
      verifyPassword('guess', stored).then(
        () => 'checked',
        (err: { code?: string; retryAfter?: number }) => `${err.code} ${err.retryAfter}`,
      ),
    );
    const answers = await Promise.all(flood);
    expect(answers.filter((a) => a === 'rate-limited 1')).toHaveLength(5);
    expect(scryptLoad()).toEqual({ running: 0, waiting: 0 });
  }, 60_000);
});
