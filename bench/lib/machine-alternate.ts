/**
 * The samples of a machine benchmark that brings a machine up (create, start) against a
 * plain fork+exec of the same httpd: alternated, baseline then pier, so that a machine
 * that gets busier or quieter during the run moves both sides alike; each sample printed
 * as it comes, both sides summed up at the end, and reported, in the same lines and
 * `notes` for every such benchmark.
 */
import type { BenchmarkResult } from './benchmark.js';
import { describeSample, describeSamples, type Sample } from './db-samples.js';
import { compareLatency } from './latency-report.js';
import type { ProxiedSample } from './machine-ops.js';
import { plainSample } from './machine-plain.js';

export interface Alternation {
  /** Rounds of one baseline and one pier sample. */
  samples: number;
  /** The baselines' web root (PAGE written into it). */
  www: string;
  /** The i-th pier sample (1-based), with whatever untimed preparation it needs first. */
  pier(i: number): Promise<ProxiedSample>;
  /** Untimed, after the sample's lines: what it leaves to undo (a machine to destroy). */
  after?(s: ProxiedSample): Promise<unknown>;
  /** pier's goal on its summary line, e.g. `goal < 300 ms`. */
  goal: string;
}

/** The baseline's samples, pier's, and pier's POSTs split by their timelines. */
export interface Rounds {
  plain: Sample[];
  pier: Sample[];
  post: Sample[];
}

export async function alternateWithPlain(a: Alternation): Promise<Rounds> {
  const plain: Sample[] = [];
  const pier: Sample[] = [];
  const post: Sample[] = [];
  for (let i = 1; i <= a.samples; i++) {
    const p = await plainSample(a.www);
    plain.push(p);
    const s = await a.pier(i);
    pier.push(s.sample);
    post.push(s.post);
    console.log(`  #${i} baseline ${describeSample(p)}`);
    console.log(`     pier ${describeSample(s.sample)} (${s.tries} GET)`);
    console.log(`       ${s.postLine}`);
    await a.after?.(s);
  }
  console.log(`  baseline: ${describeSamples(plain)}`);
  console.log(`  pier:     ${describeSamples(pier)} (${a.goal})`);
  return { plain, pier, post };
}

/**
 * The runner's result of `rounds`: pier against the fork+exec baseline, with pier's POSTs,
 * split, in `notes` (`pierPOST_…`) after the benchmark's own `notes`.
 */
export function compareWithPlain(
  rounds: Rounds,
  c: { name: string; goalMs: number; store: string; notes: Record<string, string | number> },
): Promise<BenchmarkResult> {
  return compareLatency({
    ...c,
    baselineLabel: 'fork+exec busybox httpd → 200',
    baseline: rounds.plain,
    pier: rounds.pier,
    context: { pierPOST: rounds.post },
  });
}
