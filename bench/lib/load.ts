/**
 * Load generation: `measure()` drives one URL with autocannon and answers throughput and
 * latency. The load runs in a child process (load-worker.ts) so that it does not steal the
 * event loop of the server under test, which lives in this process; every side of a
 * comparison is measured the same way. Any non-2xx answer or socket error fails loudly: a
 * fast error page is not a result.
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export interface LoadOptions {
  url: string;
  /** GET unless given (a POST benchmark sends the same `body` every time). */
  method?: 'GET' | 'POST';
  body?: string;
  headers?: Record<string, string>;
  /** The TLS server name (SNI) for an https URL (autocannon does not verify the chain). */
  servername?: string;
  /** Concurrent keep-alive connections. */
  connections: number;
  /** Length of the measured run. */
  durationS: number;
  /** Length of the unmeasured run just before it (JIT, caches, connection pools). */
  warmupS: number;
}

export interface LoadResult {
  requestsPerSec: number;
  p50Ms: number;
  p99Ms: number;
  non2xx: number;
  errors: number;
  /** Completed requests in the measured run. */
  requests: number;
  durationS: number;
}

/** One autocannon run as the worker reports it. */
export interface RunReport extends LoadResult {
  timeouts: number;
  statusCodes: Record<string, number>;
}

export interface WorkerReport {
  warmup: RunReport | null;
  measured: RunReport;
}

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const workerPath = fileURLToPath(new URL('./load-worker.ts', import.meta.url));

export async function measure(opts: LoadOptions): Promise<LoadResult> {
  const report = await runWorker(opts);
  if (report.warmup) check('warmup', opts.url, report.warmup);
  check('measured run', opts.url, report.measured);
  const { requestsPerSec, p50Ms, p99Ms, non2xx, errors, requests, durationS } = report.measured;
  return { requestsPerSec, p50Ms, p99Ms, non2xx, errors, requests, durationS };
}

function check(phase: string, url: string, r: RunReport): void {
  if (r.non2xx === 0 && r.errors === 0 && r.requests > 0) return;
  const codes = Object.entries(r.statusCodes)
    .map(([code, n]) => `${code}×${n}`)
    .join(', ');
  throw new Error(
    `load on ${url} failed in the ${phase}: ${r.requests} requests, ${r.non2xx} non-2xx, ` +
      `${r.errors} errors (${r.timeouts} timeouts); status codes: ${codes || 'none'}`,
  );
}

function runWorker(opts: LoadOptions): Promise<WorkerReport> {
  // Generous: tsx start-up, two runs, and autocannon's own wind-down.
  const limitMs = (opts.durationS + opts.warmupS) * 1000 + 60_000;
  return runTsWorker(workerPath, opts, limitMs, `load worker for ${opts.url}`, parseReport);
}

/**
 * Runs the TypeScript file `file` in a child node (tsx) with `arg` as its JSON argument,
 * and answers `parse` of what it printed; killed past `limitMs`. `label` names it in errors.
 */
export function runTsWorker<T>(
  file: string,
  arg: unknown,
  limitMs: number,
  label: string,
  parse: (stdout: string) => T,
): Promise<T> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', file, JSON.stringify(arg)], {
      cwd: root,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (s: string) => (stdout += s));
    child.stderr.setEncoding('utf8').on('data', (s: string) => (stderr += s));
    const timer = setTimeout(() => child.kill('SIGKILL'), limitMs);
    child.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      if (code !== 0) {
        const why = signal ? `was killed by ${signal}` : `exited with ${code}`;
        reject(new Error(`${label} ${why}:\n${stderr.trim()}`));
        return;
      }
      try {
        resolve(parse(stdout));
      } catch (err) {
        reject(new Error(`${label} printed no report (${String(err)}):\n${stdout}`));
      }
    });
  });
}

function parseReport(text: string): WorkerReport {
  const value: unknown = JSON.parse(text);
  if (!isObject(value)) throw new Error('unexpected shape');
  const { warmup, measured } = value;
  if (!isRunReport(measured) || (warmup !== null && !isRunReport(warmup))) {
    throw new Error('unexpected shape');
  }
  return { warmup, measured };
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null;
}

function isRunReport(v: unknown): v is RunReport {
  if (!isObject(v) || !isObject(v.statusCodes)) return false;
  const numbers = ['requestsPerSec', 'p50Ms', 'p99Ms', 'non2xx', 'errors', 'timeouts', 'requests'];
  return numbers.every((k) => typeof v[k] === 'number');
}
