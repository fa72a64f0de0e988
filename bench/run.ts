/**
 * `npm run bench [-- NAME...]`: runs every `bench/*.bench.ts` in turn (or only those
 * named), prints a summary table and writes bench/results.json. A new benchmark is a new
 * file that default-exports a `Benchmark`; nothing here needs to change.
 *
 * Env: BENCH_DURATION_S (measured seconds per run, default 10), BENCH_WARMUP_S (default 2).
 */
import { readdir, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import {
  isBenchmark,
  type BenchSettings,
  type Benchmark,
  type BenchmarkResult,
} from './lib/benchmark.js';

const benchDir = path.dirname(fileURLToPath(import.meta.url));
const resultsPath = path.join(benchDir, 'results.json');

function seconds(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 0) throw new Error(`${name} must be a whole number of seconds`);
  return n;
}

async function discover(only: string[]): Promise<Benchmark[]> {
  const files = (await readdir(benchDir)).filter((f) => f.endsWith('.bench.ts')).sort();
  const found: Benchmark[] = [];
  for (const file of files) {
    const mod = (await import(pathToFileURL(path.join(benchDir, file)).href)) as {
      default?: unknown;
    };
    if (!isBenchmark(mod.default)) throw new Error(`${file} does not default-export a Benchmark`);
    found.push(mod.default);
  }
  const unknown = only.filter((n) => !found.some((b) => b.name === n));
  if (unknown.length) {
    const known = found.map((b) => b.name).join(', ');
    throw new Error(`no benchmark named ${unknown.join(', ')} (there are: ${known})`);
  }
  return only.length ? found.filter((b) => only.includes(b.name)) : found;
}

function table(rows: string[][]): string {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length)));
  return rows.map((r) => r.map((cell, i) => cell.padEnd(widths[i]!)).join('  ')).join('\n');
}

function summary(results: BenchmarkResult[], failures: { name: string; error: string }[]): string {
  const rows = [
    ['benchmark', 'baseline', 'base req/s', 'pier req/s', 'ratio', 'base p99', 'pier p99', 'goal'],
  ];
  const num = (n: number) => Math.round(n).toLocaleString('en-US');
  const ms = (n: number) => `${n.toFixed(2)} ms`;
  for (const r of results) {
    const goal = `≥ ${r.goal.minRatio.toFixed(2)}, p99 < ${r.goal.maxP99Ms} ms`;
    rows.push([
      r.name,
      r.baselineLabel,
      num(r.baseline.requestsPerSec),
      num(r.pier.requestsPerSec),
      r.ratio.toFixed(2),
      ms(r.baseline.p99Ms),
      ms(r.pier.p99Ms),
      `${r.goalMet ? 'met' : 'NOT met'} (${goal})`,
    ]);
  }
  for (const f of failures)
    rows.push([f.name, 'FAILED', '', '', '', '', '', f.error.split('\n')[0]!]);
  return table(rows);
}

async function main(): Promise<void> {
  const settings: BenchSettings = {
    durationS: seconds('BENCH_DURATION_S', 10),
    warmupS: seconds('BENCH_WARMUP_S', 2),
  };
  if (settings.durationS < 1) throw new Error('BENCH_DURATION_S must be at least 1');
  const benchmarks = await discover(process.argv.slice(2));
  const results: BenchmarkResult[] = [];
  const failures: { name: string; error: string }[] = [];
  const startedAt = new Date();

  for (const b of benchmarks) {
    console.log(
      `▸ ${b.name}: ${b.description} (${settings.warmupS} s warm-up, ${settings.durationS} s measured per side)`,
    );
    try {
      results.push(await b.run(settings));
    } catch (err) {
      const error = err instanceof Error ? (err.stack ?? err.message) : String(err);
      console.error(`✗ ${b.name} failed:\n${error}`);
      failures.push({ name: b.name, error: err instanceof Error ? err.message : String(err) });
    }
  }

  console.log(`\n${summary(results, failures)}`);
  const cpus = os.cpus();
  const report = {
    startedAt: startedAt.toISOString(),
    finishedAt: new Date().toISOString(),
    machine: {
      cpus: cpus.length,
      cpuModel: cpus[0]?.model ?? 'unknown',
      node: process.version,
      platform: `${os.platform()} ${os.release()}`,
    },
    settings,
    results,
    failures,
  };
  await writeFile(resultsPath, `${JSON.stringify(report, null, 2)}\n`);
  console.log(`\nwrote ${path.relative(process.cwd(), resultsPath)}`);
  if (failures.length) process.exitCode = 1;
}

await main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
