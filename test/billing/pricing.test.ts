/** The exact arithmetic of pricing (services/billing/pricing.ts): no floating point. */
import { describe, expect, it } from 'vitest';
import {
  add,
  formatDecimal,
  fraction,
  parseDecimal,
  roundHalfUp,
} from '../../src/services/billing/exact.js';
import {
  amountOf,
  priceOf,
  pricedFromOf,
  windowStart,
} from '../../src/services/billing/pricing.js';

describe('priceOf', () => {
  it('multiplies exactly and rounds half up to the micro-cent', () => {
    expect(priceOf('12.345', 7)).toBe(86n); // 86.415
    expect(priceOf('0.5', 3)).toBe(2n); // 1.5
    expect(priceOf('0.4999999', 1)).toBe(0n);
    expect(priceOf('0', 1_000_000)).toBe(0n);
    expect(priceOf('3600.000', 77)).toBe(277_200n);
    expect(priceOf('0.1', 3)).toBe(0n); // 0.3, where 0.1 × 3 in floats is 0.30000000000000004
    expect(priceOf('0.7', 5)).toBe(4n); // 3.5 exactly, not 3.4999… as a float
  });

  it('sums the parts of several lists exactly and rounds once', () => {
    // 0.3 × 5 + 0.3 × 5 = 3.0: rounded part by part (2 + 2) it would be one too many.
    expect(
      amountOf([
        { quantity: '0.3', priceMicros: 5 },
        { quantity: '0.3', priceMicros: 5 },
      ]),
    ).toBe(3n);
    expect(
      amountOf([
        { quantity: '1200.5', priceMicros: 7 },
        { quantity: '0.25', priceMicros: 2 },
      ]),
    ).toBe(8404n); // 8403.5 + 0.5 = 8404
    expect(amountOf([])).toBe(0n);
  });

  it('stays exact far beyond 2^53', () => {
    const q = '98765432109876.123456789';
    const p = 1e12;
    expect(priceOf(q, p)).toBe(98_765_432_109_876_123_456_789_000n);
  });

  it('refuses what is not a non-negative decimal', () => {
    for (const bad of ['-1', '1e3', 'abc', '']) expect(() => priceOf(bad, 1)).toThrow();
  });
});

describe('fractions (a tick shared among lists)', () => {
  it('sums shares exactly and rounds once', () => {
    // A third of a unit at 1,000,000 and two thirds at 2,000,000: 1,666,666.67 → 1,666,667.
    expect(
      amountOf([
        { quantity: fraction(1n, 3n), priceMicros: 1_000_000 },
        { quantity: fraction(2n, 3n), priceMicros: 2_000_000 },
      ]),
    ).toBe(1_666_667n);
    // Shares of 0.001 s over 3 µs parts of a 7 µs tick: 3/7 × 0.001 × 7e6 = 3000 exactly.
    expect(amountOf([{ quantity: fraction(3n, 7000n), priceMicros: 7_000_000 }])).toBe(3000n);
    expect(roundHalfUp(fraction(5n, 2n))).toBe(3n);
    expect(roundHalfUp(fraction(7n, 3n))).toBe(2n);
  });

  it('writes a share exactly when it can, marked ≈ when it cannot', () => {
    expect(formatDecimal(parseDecimal('90.000').value, 3)).toBe('90.000');
    expect(formatDecimal(fraction(1n, 8n))).toBe('0.125');
    expect(formatDecimal(fraction(1n, 3n))).toBe('≈0.333333333');
    expect(formatDecimal(fraction(2n, 3n), 3)).toBe('≈0.666666667');
    expect(formatDecimal(add(fraction(1n, 3n), fraction(2n, 3n)))).toBe('1');
  });
});

describe('windows and pricedFrom', () => {
  const hour = 3600_000;
  it('lie on a grid from the epoch', () => {
    const t = new Date('2026-11-24T10:20:30.400Z');
    expect(windowStart(t, hour).toISOString()).toBe('2026-11-24T10:00:00.000Z');
    expect(windowStart(new Date('2026-11-24T10:00:00Z'), hour).toISOString()).toBe(
      '2026-11-24T10:00:00.000Z',
    );
  });

  it('starts pricing at the later of the account’s window and the first list’s moment', () => {
    const list = { prices: {}, decidedAt: new Date('2026-11-24T10:20:00Z') };
    expect(pricedFromOf(null, [list], hour)).toEqual({ reason: 'no-credit-account' });
    expect(pricedFromOf(new Date(), [], hour)).toEqual({ reason: 'no-price-list' });
    // A list decided at 10:20 prices usage from 10:20, not from the next window.
    expect(pricedFromOf(new Date('2026-01-01T00:00:00Z'), [list], hour).pricedFrom).toEqual(
      new Date('2026-11-24T10:20:00Z'),
    );
    expect(pricedFromOf(new Date('2026-11-25T08:30:00Z'), [list], hour).pricedFrom).toEqual(
      new Date('2026-11-25T08:00:00Z'),
    );
  });
});
