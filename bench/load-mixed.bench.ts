/**
 * Mixed traffic on one pier (issue 24, item 11): a real `pier serve` in its own process
 * (lib/machine-pier.ts), an organization, an app `web` with one running machine behind the
 * proxy, and a bucket with objects. Every connection goes round the same cycle: read the
 * app, list its machines, create and revoke a key, two proxied GETs, a presigned object
 * GET and a presigned object PUT (lib/mixed-worker.ts).
 *
 * First a quiet run (QUIET_CONNECTIONS), then the load (CONNECTIONS), each connection at
 * the same fixed rate: a closed loop at full speed would measure only the queue in front
 * of a saturated 2-core machine (p99 ≈ connections ÷ throughput), not whether pier serves
 * 50 clients as it serves 5. The verdict:
 *
 * - no error: every answer 2xx, no socket error or timeout (else the benchmark fails);
 * - p99 under load ≤ 2 × the quiet run's p99 (the goal the runner reports);
 * - pier kept up: load req/s ≥ 90 % of what the connections offered (the ratio's goal);
 * - memory: pier's RSS before the load, its peak during it, and after it (some idle
 *   seconds and two full collections through the inspector), as after ÷ before.
 *
 * `BENCH_DURATION_S` shortens the load (default 60 s here, not the runner's 10);
 * `BENCH_LOAD_RATE` sets requests per second per connection (default 10).
 */
import os from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { compare, type Benchmark } from './lib/benchmark.js';
import { fmtMs, round } from './lib/db-samples.js';
import { collectGarbage, inspectorUrlIn } from './lib/inspector-gc.js';
import { keepAliveImage } from './lib/keepalive-machine.js';
import { runTsWorker, type LoadResult } from './lib/load.js';
import {
  firstOk,
  PAGE,
  proxiedGet,
  withMachineBench,
  type MachinePier,
} from './lib/machine-pier.js';
import { cpuSeconds, CpuTally, hostBusySeconds, memoryOf } from './lib/machine-proc.js';
import type { MixedOptions, MixedReport } from './lib/mixed-worker.js';

const CONNECTIONS = 50;
const QUIET_CONNECTIONS = 5;
const RATE = Number(process.env.BENCH_LOAD_RATE ?? 10);
/** `even` (the default) or `burst` (autocannon's connectionRate): lib/mixed-worker.ts. */
const PACING = process.env.BENCH_LOAD_PACING === 'burst' ? 'burst' : 'even';
/** The load lasts this long unless BENCH_DURATION_S says otherwise (issue 24: 60 s). */
const DEFAULT_LOAD_S = 60;
const QUIET_S = 15;
/** Objects the GETs go round, and their size. */
const OBJECTS = 20;
const OBJECT_BYTES = 1024;
/** Goals: p99 under load within this factor of the quiet p99; RSS after within this of before. */
const MAX_P99_FACTOR = 2;
const MAX_RSS_AFTER_FACTOR = 1.25;
/** Idle time after the load before memory is read again. */
const SETTLE_MS = 5_000;

const workerPath = fileURLToPath(new URL('./lib/mixed-worker.ts', import.meta.url));

const runMixed = (opts: MixedOptions) =>
  runTsWorker(
    workerPath,
    opts,
    opts.durationS * 1000 + 60_000,
    'mixed load worker',
    (stdout) => JSON.parse(stdout) as MixedReport,
  );

/** CPU per answered request, in ms, of each party on the two cores, and of the whole host. */
interface CpuPerRequest {
  pier: number;
  postgres: number;
  loadGenerator: number;
  /** Everything the host ran: the three above, the app's machine, the kernel, other work. */
  host: number;
  /** The host's busy CPU over the run, in cores (2 = both cores busy all the time). */
  hostCores: number;
}

/**
 * Runs the load and measures the CPU it cost: pier's process, the PostgreSQL backends of
 * its database (sampled every 250 ms, so that a backend which ends is not lost), the load
 * worker (its own count) and the host, divided by the requests answered.
 */
async function runMeasured(
  b: MachinePier,
  opts: MixedOptions,
): Promise<{ report: MixedReport; cpu: CpuPerRequest }> {
  const pg = new CpuTally('postgres', b.databaseName ?? '(embedded store)');
  await pg.sample();
  const pier0 = await cpuSeconds(b.pid);
  const host0 = await hostBusySeconds();
  const t0 = Date.now();
  let running = true;
  const sampler = (async () => {
    while (running) {
      await sleep(250);
      await pg.sample();
    }
  })();
  const report = await runMixed(opts).finally(() => (running = false));
  await sampler;
  await pg.sample();
  const hostS = (await hostBusySeconds()) - host0;
  const wallS = (Date.now() - t0) / 1000;
  const per = (seconds: number) => (seconds * 1000) / Math.max(1, report.requests);
  return {
    report,
    cpu: {
      pier: per((await cpuSeconds(b.pid)) - pier0),
      postgres: per(pg.seconds()),
      loadGenerator: report.cpuMs / Math.max(1, report.requests),
      host: per(hostS),
      hostCores: hostS / wallS,
    },
  };
}

const fmtCpu = (c: CpuPerRequest) =>
  `pier ${c.pier.toFixed(2)}, PostgreSQL ${c.postgres.toFixed(2)}, load generator ` +
  `${c.loadGenerator.toFixed(2)}, host ${c.host.toFixed(2)} ms (host busy ${c.hostCores.toFixed(2)} cores)`;

/** Path and query of a presigned URL: the worker sends everything to pier's listener. */
const pathOf = (url: string) => {
  const u = new URL(url);
  return u.pathname + u.search;
};

interface Presigned {
  url: string;
  requiredHeaders?: Record<string, string>;
}

async function presign(b: MachinePier, bucket: string, op: 'get' | 'put', key: string) {
  const p = (await b.api('POST', `/v1/buckets/${bucket}/presign`, {
    op,
    key,
    expiresInS: 7200,
  })) as Presigned;
  if (Object.keys(p.requiredHeaders ?? {}).length > 0)
    throw new Error(`a presigned ${op} wants headers: ${JSON.stringify(p.requiredHeaders)}`);
  return p.url;
}

/** Makes the bucket and its objects; answers the GET and PUT paths the load uses. */
async function bucketWithObjects(b: MachinePier, name: string, body: string) {
  await b.api('POST', '/v1/buckets', { name }, 201);
  const getPaths: string[] = [];
  for (let i = 0; i < OBJECTS; i++) {
    const put = await fetch(await presign(b, name, 'put', `get-${i}`), { method: 'PUT', body });
    if (put.status !== 200) throw new Error(`object put answered ${put.status}`);
    getPaths.push(pathOf(await presign(b, name, 'get', `get-${i}`)));
  }
  const putPaths: string[] = [];
  for (let i = 0; i < CONNECTIONS; i++)
    putPaths.push(pathOf(await presign(b, name, 'put', `put-${i}`)));
  return { getPaths, putPaths };
}

function asLoad(r: MixedReport, durationS: number): LoadResult {
  return {
    requestsPerSec: r.requestsPerSec,
    p50Ms: r.p50Ms,
    p99Ms: r.p99Ms,
    non2xx: r.non2xx,
    errors: r.errors,
    requests: r.requests,
    durationS,
  };
}

function describe(label: string, r: MixedReport, cpu: CpuPerRequest): void {
  const kinds = Object.entries(r.p99MsByKind)
    .map(([k, ms]) => `${k} ${fmtMs(ms)}`)
    .join(', ');
  console.log(
    `  ${label}: ${r.requests} requests, ${Math.round(r.requestsPerSec)} req/s, ` +
      `p50 ${fmtMs(r.p50Ms)}, p99 ${fmtMs(r.p99Ms)}, max ${fmtMs(r.maxMs)}; ` +
      `non-2xx ${r.non2xx}, errors ${r.errors}, timeouts ${r.timeouts}\n    p99 by kind: ${kinds}`,
  );
  console.log(`    CPU per request: ${fmtCpu(cpu)}`);
  if (Object.keys(r.failures).length) console.log(`    failures: ${JSON.stringify(r.failures)}`);
  for (const f of r.failureBodies) console.log(`      ${f}`);
}

/** pier's log lines of level warn and above (pino: 40+), the last 30. */
async function warnings(b: MachinePier): Promise<string> {
  const lines = (await b.logTail(1_000_000)).split('\n');
  return lines
    .filter((l) => /"level":(4|5|6)\d/.test(l))
    .slice(-30)
    .join('\n');
}

const roundAll = (c: CpuPerRequest) =>
  Object.fromEntries(Object.entries(c).map(([k, v]) => [k, round(v, 3)]));

const mib = async (pid: number) => {
  const m = await memoryOf(pid);
  if (!m) throw new Error('pier is gone');
  return m;
};

const benchmark: Benchmark = {
  name: 'load-mixed',
  description: `mixed traffic (API reads and writes, proxied app, bucket GET/PUT) at ${RATE} req/s per connection, paced ${PACING}: ${CONNECTIONS} connections vs ${QUIET_CONNECTIONS}`,
  async run(settings) {
    const loadS = process.env.BENCH_DURATION_S ? settings.durationS : DEFAULT_LOAD_S;
    return withMachineBench(
      'load-mixed',
      async (b) => {
        const inspector = inspectorUrlIn(await b.logTail(200));
        if (!inspector) throw new Error('pier printed no inspector address');
        await b.createApp('web');
        await b.createMachine('web', { image: await keepAliveImage(b), memoryMb: 256 });
        await firstOk(() => proxiedGet(b.url, 'web'));
        const body = 'x'.repeat(OBJECT_BYTES);
        const bucket = `load-${Date.now().toString(36)}`;
        const { getPaths, putPaths } = await bucketWithObjects(b, bucket, body);
        const base: Omit<MixedOptions, 'connections' | 'durationS'> = {
          url: b.url,
          token: b.org.token,
          app: 'web',
          appHost: 'web.127.0.0.1',
          appPath: PAGE.path,
          getPaths,
          putPaths,
          putBody: body,
          rate: RATE,
          pacing: PACING,
        };
        const loadAverage1m = round(os.loadavg()[0]!, 2);

        // Warm-up (JIT, pools), then the quiet run and the memory it leaves.
        if (settings.warmupS > 0)
          await runMixed({ ...base, connections: QUIET_CONNECTIONS, durationS: settings.warmupS });
        const { report: quiet, cpu: quietCpu } = await runMeasured(b, {
          ...base,
          connections: QUIET_CONNECTIONS,
          durationS: Math.min(QUIET_S, loadS),
        });
        describe(`quiet (${QUIET_CONNECTIONS} connections)`, quiet, quietCpu);
        await collectGarbage(inspector);
        const before = await mib(b.pid);

        let peak = before.rssMiB;
        let sampling = true;
        const sampler = (async () => {
          while (sampling) {
            const m = await memoryOf(b.pid);
            if (m) peak = Math.max(peak, m.rssMiB);
            await sleep(250);
          }
        })();
        const { report: load, cpu: loadCpu } = await runMeasured(b, {
          ...base,
          connections: CONNECTIONS,
          durationS: loadS,
        }).finally(() => (sampling = false));
        await sampler;
        describe(`load (${CONNECTIONS} connections, ${loadS} s)`, load, loadCpu);
        // What the offered rate asks of the two cores, at the CPU per request just measured.
        const offered = CONNECTIONS * RATE;
        const cores = os.cpus().length;
        const busy = (loadCpu.pier + loadCpu.postgres + loadCpu.loadGenerator) * offered;
        console.log(
          `  at ${offered} req/s, pier + PostgreSQL + load generator need ${(busy / 1000).toFixed(2)} ` +
            `of ${cores} cores (pier alone ${((loadCpu.pier * offered) / 1000).toFixed(2)})`,
        );

        await sleep(SETTLE_MS);
        await collectGarbage(inspector);
        await collectGarbage(inspector);
        const after = await mib(b.pid);
        const p99Factor = load.p99Ms / quiet.p99Ms;
        const rssFactor = after.rssMiB / before.rssMiB;
        console.log(
          `  p99 under load ÷ quiet: ${p99Factor.toFixed(2)} (goal ≤ ${MAX_P99_FACTOR}); ` +
            `RSS before ${before.rssMiB.toFixed(0)} MiB, peak ${peak.toFixed(0)} MiB, ` +
            `after ${after.rssMiB.toFixed(0)} MiB: after ÷ before ${rssFactor.toFixed(2)} ` +
            `(goal ≤ ${MAX_RSS_AFTER_FACTOR})`,
        );

        for (const [label, r] of [
          ['quiet run', quiet],
          ['load', load],
        ] as const) {
          if (r.non2xx || r.errors || r.timeouts || r.requests === 0) {
            throw new Error(
              `${label}: ${r.non2xx} non-2xx, ${r.errors} errors, ${r.timeouts} timeouts of ` +
                `${r.requests} requests (${JSON.stringify(r.failures)}); pier's warnings:\n${await warnings(b)}`,
            );
          }
        }
        return compare({
          name: benchmark.name,
          baselineLabel: `the same cycle on ${QUIET_CONNECTIONS} connections (quiet run)`,
          connections: CONNECTIONS,
          baseline: asLoad(quiet, Math.min(QUIET_S, loadS)),
          pier: asLoad(load, loadS),
          goal: {
            // Kept up: ~90 % of the rate the connections offered, as a multiple of quiet's.
            minRatio: (0.9 * CONNECTIONS) / QUIET_CONNECTIONS,
            maxP99Ms: MAX_P99_FACTOR * quiet.p99Ms,
          },
          notes: {
            store: b.store,
            loadAverage1m,
            loadAverage1mAfter: round(os.loadavg()[0]!, 2),
            ratePerConnection: RATE,
            pacing: PACING,
            quietCpuMsPerRequest: JSON.stringify(roundAll(quietCpu)),
            loadCpuMsPerRequest: JSON.stringify(roundAll(loadCpu)),
            loadSeconds: loadS,
            p99Factor: round(p99Factor, 2),
            p99FactorGoal: MAX_P99_FACTOR,
            loadMaxMs: round(load.maxMs, 1),
            loadP99ByKind: JSON.stringify(load.p99MsByKind),
            quietP99ByKind: JSON.stringify(quiet.p99MsByKind),
            rssBeforeMiB: round(before.rssMiB, 1),
            rssPeakMiB: round(peak, 1),
            rssAfterMiB: round(after.rssMiB, 1),
            rssAfterFactor: round(rssFactor, 2),
            rssAfterFactorGoal: MAX_RSS_AFTER_FACTOR,
            rssAfterMet: rssFactor <= MAX_RSS_AFTER_FACTOR ? 'met' : 'NOT met',
            pierNodeFlags: b.nodeFlags,
          },
        });
      },
      { nodeFlags: ['--inspect=127.0.0.1:0'] },
    );
  },
};

export default benchmark;
