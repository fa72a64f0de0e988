/**
 * The child process of `measure()`: runs autocannon against one URL, first a warm-up and
 * then the measured run, and prints both reports as one JSON line on stdout. Options
 * arrive as a JSON argument. Latencies are taken from every response at microsecond
 * resolution (autocannon's own histogram rounds to whole milliseconds, too coarse here).
 */
import { createHistogram } from 'node:perf_hooks';
import autocannon from 'autocannon';
import type { LoadOptions, RunReport, WorkerReport } from './load.js';

async function run(opts: LoadOptions, durationS: number): Promise<RunReport> {
  const latencyUs = createHistogram();
  const instance = autocannon({
    url: opts.url,
    method: opts.method ?? 'GET',
    ...(opts.body === undefined ? {} : { body: opts.body }),
    headers: opts.headers ?? {},
    ...(opts.servername === undefined ? {} : { servername: opts.servername }),
    connections: opts.connections,
    duration: durationS,
    timeout: 10,
  });
  instance.on('response', (_client, _status, _bytes, responseTimeMs) => {
    latencyUs.record(Math.max(1, Math.round(responseTimeMs * 1000)));
  });
  const r = await instance;
  const statusCodes: Record<string, number> = {};
  for (const [code, s] of Object.entries(r.statusCodeStats)) statusCodes[code] = Number(s.count);
  const requests = r.requests.total;
  return {
    requestsPerSec: r.requests.average,
    p50Ms: requests > 0 ? latencyUs.percentile(50) / 1000 : 0,
    p99Ms: requests > 0 ? latencyUs.percentile(99) / 1000 : 0,
    non2xx: r.non2xx,
    errors: r.errors,
    timeouts: r.timeouts,
    requests,
    durationS: r.duration,
    statusCodes,
  };
}

const arg = process.argv[2];
if (!arg) throw new Error('usage: load-worker.ts <LoadOptions as JSON>');
const opts = JSON.parse(arg) as LoadOptions;
const warmup = opts.warmupS > 0 ? await run(opts, opts.warmupS) : null;
const measured = await run(opts, opts.durationS);
const report: WorkerReport = { warmup, measured };
process.stdout.write(`${JSON.stringify(report)}\n`);
