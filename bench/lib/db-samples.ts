/**
 * Timed samples of the database benchmarks and how they become a `LoadResult`: each side
 * of a latency comparison is expressed as operations per second (1000 ÷ mean ms) and the
 * p99 of its samples, as `buckets-throughput` does with its `asLoad`. With a handful of
 * samples the p99 is the slowest one (nearest rank).
 */
import { performance } from 'node:perf_hooks';
import type { LoadResult } from './load.js';

/** One timed operation: its total and the parts it is made of (ms), in order. */
export interface Sample {
  ms: number;
  parts: Record<string, number>;
}

/** Times the steps of one operation: `step()` ends the current part and starts the next. */
export class Stopwatch {
  private readonly start = performance.now();
  private last = this.start;
  private readonly parts: Record<string, number> = {};
  private readonly ends: Record<string, number> = {};

  /** Ends the part named `name` (the time since the previous step). */
  step(name: string): void {
    const now = performance.now();
    this.parts[name] = (this.parts[name] ?? 0) + (now - this.last);
    this.ends[name] = now;
    this.last = now;
  }

  /** Wall-clock time (ms since the epoch) of the start, or of the end of step `name`. */
  epoch(name?: string): number {
    const at = name === undefined ? this.start : this.ends[name];
    if (at === undefined) throw new Error(`no step ${name}`);
    return performance.timeOrigin + at;
  }

  /** The sample: the total up to the last step. */
  done(): Sample {
    return { ms: this.last - this.start, parts: { ...this.parts } };
  }
}

/** The value at percentile `p` (0–100) of `sorted`, by nearest rank. */
export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) throw new Error('no samples');
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length));
  return sorted[Math.min(rank, sorted.length) - 1]!;
}

export function mean(values: number[]): number {
  if (values.length === 0) throw new Error('no samples');
  return values.reduce((a, b) => a + b, 0) / values.length;
}

/** Operations per second (1000 ÷ mean ms), p50 and p99 of the samples. */
export function asLoad(samples: Sample[]): LoadResult {
  const ms = samples.map((s) => s.ms).sort((a, b) => a - b);
  const total = ms.reduce((a, b) => a + b, 0);
  return {
    requestsPerSec: 1000 / mean(ms),
    p50Ms: percentile(ms, 50),
    p99Ms: percentile(ms, 99),
    non2xx: 0,
    errors: 0,
    requests: ms.length,
    durationS: total / 1000,
  };
}

/** Mean of each part over the samples, in the order the parts first appear. */
export function meanParts(samples: Sample[]): Record<string, number> {
  const names: string[] = [];
  for (const s of samples)
    for (const k of Object.keys(s.parts)) if (!names.includes(k)) names.push(k);
  const out: Record<string, number> = {};
  for (const k of names) out[k] = mean(samples.map((s) => s.parts[k] ?? 0));
  return out;
}

export const fmtMs = (n: number) => `${n < 100 ? n.toFixed(1) : Math.round(n).toString()} ms`;

/** `total (part a + part b + …)` for a log line. */
export function describeSample(s: Sample): string {
  const parts = Object.entries(s.parts)
    .map(([k, v]) => `${k} ${fmtMs(v)}`)
    .join(' + ');
  return `${fmtMs(s.ms)} (${parts})`;
}

/** `mean X, min–max Y–Z over n` for a summary line. */
export function describeSamples(samples: Sample[]): string {
  const ms = samples.map((s) => s.ms);
  return (
    `mean ${fmtMs(mean(ms))}, min–max ${fmtMs(Math.min(...ms))}–${fmtMs(Math.max(...ms))} ` +
    `over ${ms.length}`
  );
}

/** Notes for `results.json`: mean, min, max and the mean of each part, rounded to 0.1 ms. */
export function sampleNotes(prefix: string, samples: Sample[]): Record<string, number> {
  const ms = samples.map((s) => s.ms);
  const out: Record<string, number> = {
    [`${prefix}_meanMs`]: round(mean(ms)),
    [`${prefix}_minMs`]: round(Math.min(...ms)),
    [`${prefix}_maxMs`]: round(Math.max(...ms)),
    [`${prefix}_samples`]: ms.length,
  };
  for (const [k, v] of Object.entries(meanParts(samples))) out[`${prefix}_${k}Ms`] = round(v);
  return out;
}

export function round(n: number, digits = 1): number {
  const f = 10 ** digits;
  return Math.round(n * f) / f;
}
