/**
 * Exact arithmetic for pricing: non-negative decimals and fractions of bigints. Usage is
 * priced pro rata over the time it covers (pricing.ts), and the share of an event after a
 * list's moment is a fraction (microseconds after it over microseconds covered) that no
 * decimal holds exactly, so amounts are summed as fractions and rounded once, half up, to
 * the micro-cent. No floating point on the way to the ledger.
 */

/** n / d, with d > 0 and the fraction reduced. */
export interface Fraction {
  n: bigint;
  d: bigint;
}

export const ZERO: Fraction = { n: 0n, d: 1n };

function gcd(a: bigint, b: bigint): bigint {
  while (b !== 0n) [a, b] = [b, a % b];
  return a < 0n ? -a : a;
}

export function fraction(n: bigint, d: bigint): Fraction {
  if (d <= 0n) throw new Error('a fraction needs a positive denominator');
  const g = gcd(n, d);
  return g > 1n ? { n: n / g, d: d / g } : { n, d };
}

/** A non-negative decimal string (`12.345`) as an exact fraction, and its number of decimals. */
export function parseDecimal(text: string): { value: Fraction; decimals: number } {
  const m = /^(\d+)(?:\.(\d+))?$/.exec(text.trim());
  if (!m) throw new Error(`not a non-negative decimal: ${text}`);
  const frac = m[2] ?? '';
  return {
    value: fraction(BigInt(m[1]! + frac), 10n ** BigInt(frac.length)),
    decimals: frac.length,
  };
}

export function add(a: Fraction, b: Fraction): Fraction {
  return fraction(a.n * b.d + b.n * a.d, a.d * b.d);
}

export function times(a: Fraction, b: Fraction): Fraction {
  return fraction(a.n * b.n, a.d * b.d);
}

/** The integer nearest a non-negative fraction, halves rounded up. */
export function roundHalfUp(a: Fraction): bigint {
  return (2n * a.n + a.d) / (2n * a.d);
}

/** The decimals a fraction needs to be written exactly, or undefined when none suffice. */
function exactDecimals(a: Fraction): number | undefined {
  let d = a.d;
  let twos = 0;
  let fives = 0;
  while (d % 2n === 0n) [d, twos] = [d / 2n, twos + 1];
  while (d % 5n === 0n) [d, fives] = [d / 5n, fives + 1];
  return d === 1n ? Math.max(twos, fives) : undefined;
}

/** Digits of round(a × 10^decimals), with the point put back. */
function digits(a: Fraction, decimals: number): string {
  const scaled = roundHalfUp(times(a, { n: 10n ** BigInt(decimals), d: 1n }));
  const s = scaled.toString().padStart(decimals + 1, '0');
  return decimals === 0 ? s : `${s.slice(0, -decimals)}.${s.slice(-decimals)}`;
}

/** How many decimals an inexact quantity is written with (quantities carry at most 9). */
const SHOWN_DECIMALS = 9;

/**
 * A fraction written as a decimal, with at least `minDecimals` decimals: exactly when it
 * has a finite decimal form, else rounded to nine decimals and marked `≈` (only ever
 * shown to people; amounts are computed from the fraction itself).
 */
export function formatDecimal(a: Fraction, minDecimals = 0): string {
  const exact = exactDecimals(a);
  if (exact !== undefined) return digits(a, Math.max(exact, minDecimals));
  return `≈${digits(a, Math.max(SHOWN_DECIMALS, minDecimals))}`;
}
