/**
 * What a benchmark is and what it answers. Each `bench/*.bench.ts` file default-exports one
 * `Benchmark`; the runner finds them by name. A benchmark measures pier against a baseline
 * in the same run and reports the ratio, so that a noisy or slow machine moves both sides.
 */
import type { LoadResult } from './load.js';

export interface BenchSettings {
  /** Length of each measured run. */
  durationS: number;
  /** Length of the unmeasured run before each measured one. */
  warmupS: number;
}

export interface Goal {
  /** Lowest acceptable pier req/s ÷ baseline req/s. */
  minRatio: number;
  /** Highest acceptable p99 latency of pier, in ms. */
  maxP99Ms: number;
}

export interface BenchmarkResult {
  name: string;
  /** What the baseline is, in a few words. */
  baselineLabel: string;
  connections: number;
  baseline: LoadResult;
  pier: LoadResult;
  /** pier req/s ÷ baseline req/s. */
  ratio: number;
  goal: Goal;
  goalMet: boolean;
  /** Anything else worth keeping with the figures (where the state lived, sizes...). */
  notes: Record<string, string | number>;
}

export interface Benchmark {
  name: string;
  description: string;
  run(settings: BenchSettings): Promise<BenchmarkResult>;
}

/** The result of one comparison: ratio and goal follow from the two measurements. */
export function compare(fields: Omit<BenchmarkResult, 'ratio' | 'goalMet'>): BenchmarkResult {
  const ratio = fields.pier.requestsPerSec / fields.baseline.requestsPerSec;
  const goalMet = ratio >= fields.goal.minRatio && fields.pier.p99Ms < fields.goal.maxP99Ms;
  return { ...fields, ratio, goalMet };
}

export function isBenchmark(v: unknown): v is Benchmark {
  if (typeof v !== 'object' || v === null) return false;
  const b = v as Partial<Record<keyof Benchmark, unknown>>;
  return typeof b.name === 'string' && typeof b.run === 'function';
}
