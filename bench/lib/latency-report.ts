/**
 * How a latency benchmark reports: the machine and database benchmarks time one operation
 * per sample, and each hands the runner the same kind of comparison — both sides as
 * operations per second (1000 ÷ mean ms) and p99 (`asLoad`), one connection, a goal on
 * pier's slowest sample, and `notes` in one order: where pier kept its state, a headline
 * saying how to read the summary's columns (which are made for load tests), the
 * benchmark's own figures, every sample set (mean, min, max, parts), how busy the machine
 * was. Written once here so that those reports stay alike and comparable.
 */
import { compare, type BenchmarkResult } from './benchmark.js';
import { asLoad, sampleNotes, type Sample } from './db-samples.js';
import { machineBusy } from './s3-load.js';

/** How to read the summary's req/s and p99 columns when a sample is one operation. */
export const LATENCY_HEADLINE =
  'req/s are operations/s (1000 ÷ mean ms); p99 is the slowest sample';

export interface LatencyComparison {
  name: string;
  /** What the baseline is, in a few words. */
  baselineLabel: string;
  baseline: Sample[];
  pier: Sample[];
  /** The names of `baseline` and `pier` in `notes` (`<name>_meanMs`...). */
  names?: [baseline: string, pier: string];
  /**
   * Absolute: every pier sample under it (the p99 of a handful of samples is the slowest
   * one). No goal is set on the ratio: the baselines do far less than pier does.
   */
  goalMs: number;
  /** Where pier kept its state in this run (`notes.store`): it changes the figures. */
  store: string;
  /** What the pier side is, when it is not the obvious: the headline then starts with it. */
  pierIs?: string;
  /** The benchmark's own figures, in `notes` right after the headline. */
  notes?: Record<string, string | number>;
  /** More sample sets, for `notes` only (not compared), after the compared ones. */
  context?: Record<string, Sample[]>;
}

/** The runner's result of a latency comparison, with the machine's load in `notes`. */
export async function compareLatency(c: LatencyComparison): Promise<BenchmarkResult> {
  const [baselineName, pierName] = c.names ?? ['baseline', 'pier'];
  const sets: [string, Sample[]][] = [
    [baselineName, c.baseline],
    [pierName, c.pier],
    ...Object.entries(c.context ?? {}),
  ];
  return compare({
    name: c.name,
    baselineLabel: c.baselineLabel,
    connections: 1,
    baseline: asLoad(c.baseline),
    pier: asLoad(c.pier),
    goal: { minRatio: 0, maxP99Ms: c.goalMs },
    notes: {
      store: c.store,
      headline: c.pierIs ? `pier = ${c.pierIs}; ${LATENCY_HEADLINE}` : LATENCY_HEADLINE,
      ...c.notes,
      ...Object.fromEntries(sets.flatMap(([name, set]) => Object.entries(sampleNotes(name, set)))),
      ...(await machineBusy()),
    },
  });
}
