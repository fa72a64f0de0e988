/**
 * A rolling deploy under load (issue 25, "Benchmarks"): app `web` with 2 machines of
 * release v1 (busybox httpd), 20 keep-alive clients GETting through pier's proxy
 * (lib/proxy-hammer.ts) without a pause; a warm-up, then the "before" run
 * (BENCH_DURATION_S), then `POST /v1/apps/web/deploys` of v2 (another page), polled until
 * `done`: the "during" run. Any refused or failed request, non-2xx answer, or a page that
 * is neither v1's nor v2's fails the benchmark, naming them. Goal: none, and p99 during
 * ≤ 2 × p99 before. The baseline is the same load on the same app just before the deploy.
 */
import type { ImageSpec } from '../src/runtime/images/build.test-helper.js';
import { busyboxLayer } from '../src/runtime/images/build.test-helper.js';
import { compare, type Benchmark } from './lib/benchmark.js';
import { round } from './lib/db-samples.js';
import { deployAndWait } from './lib/deploy-ops.js';
import { INTERNAL_PORT, MACHINE_CONFIG, PAGE, withMachineBench } from './lib/machine-pier.js';
import { ProxyHammer } from './lib/proxy-hammer.js';
import { machineBusy } from './lib/s3-load.js';

const CONNECTIONS = 20;
const GOAL_P99 = 2;
const APP = 'web';
const V2_PAGE = 'hello from release 2\n';
const V2: ImageSpec = {
  layers: [busyboxLayer(), [{ path: 'www/' }, { path: `www${PAGE.path}`, content: V2_PAGE }]],
  config: { Cmd: ['/bin/httpd', '-f', '-p', String(INTERNAL_PORT), '-h', '/www'] },
};
// httpd as PID 1 ignores SIGTERM: a short kill timeout keeps the retirements short.
const CONFIG = { ...MACHINE_CONFIG, killTimeoutS: 1 };

const benchmark: Benchmark = {
  name: 'deploy-rolling',
  description: `rolling deploy of a 2-machine app under ${CONNECTIONS} keep-alive connections through the proxy: failures and p99 during vs before`,
  run: (settings) =>
    withMachineBench('deploy-rolling', async (b) => {
      const v2 = await b.pushImage('web:2', V2);
      await b.createApp(APP);
      await deployAndWait(b, APP, { image: b.image, config: CONFIG });
      await b.createMachine(APP, { killTimeoutS: 1 }); // the second machine of v1
      const machinesBefore = (await b.api('GET', `/v1/apps/${APP}/machines`)) as any[];
      if (machinesBefore.length !== 2) throw new Error(`${machinesBefore.length} machines, not 2`);

      const hammer = new ProxyHammer(
        `${b.url}${PAGE.path}`,
        `${APP}.127.0.0.1`,
        CONNECTIONS,
        'warmup',
      );
      let deployMs = 0;
      try {
        await sleep(settings.warmupS * 1000);
        hammer.phase('before');
        await sleep(settings.durationS * 1000);
        hammer.phase('during');
        const started = Date.now();
        const steps: string[] = [];
        const d = await deployAndWait(b, APP, { image: v2 }, steps);
        deployMs = Date.now() - started;
        console.log(`  deploy ${d.id} → release ${d.release} in ${deployMs} ms`);
        console.log(`    ${steps.join(' → ')}`);
      } finally {
        await hammer.stop();
      }

      const failures = hammer.failures();
      const bodies = [...hammer.get('during').bodies.keys()];
      const strange = bodies.filter((t) => t !== PAGE.content && t !== V2_PAGE);
      if (failures.length || strange.length) {
        throw new Error(
          `${failures.length} request(s) failed or were refused, ${strange.length} unexpected page(s); ` +
            `first: ${JSON.stringify([...failures, ...strange].slice(0, 5))}\n${await b.logTail(20)}`,
        );
      }
      const before = hammer.result('before');
      const during = hammer.result('during');
      const servedV2 = hammer.get('during').bodies.get(V2_PAGE) ?? 0;
      if (servedV2 === 0) throw new Error('no request saw release 2 during the deploy');
      const machinesAfter = (await b.api('GET', `/v1/apps/${APP}/machines`)) as any[];
      const p99Ratio = during.p99Ms / before.p99Ms;
      console.log(
        `  before: ${Math.round(before.requestsPerSec)} req/s, p99 ${before.p99Ms.toFixed(1)} ms; ` +
          `during: ${Math.round(during.requestsPerSec)} req/s, p99 ${during.p99Ms.toFixed(1)} ms ` +
          `(${p99Ratio.toFixed(2)} × before, goal ≤ ${GOAL_P99}); 0 failed of ${during.requests}`,
      );
      return compare({
        name: benchmark.name,
        baselineLabel: 'the same load just before the deploy',
        connections: CONNECTIONS,
        baseline: before,
        pier: during,
        goal: { minRatio: 0, maxP99Ms: round(before.p99Ms * GOAL_P99, 2) },
        notes: {
          store: b.store,
          headline: 'pier = during the rolling deploy; ratio = req/s during ÷ before',
          failedDuringDeploy: 0,
          p99DuringOverBefore: round(p99Ratio, 2),
          deployMs,
          servedV1During: hammer.get('during').bodies.get(PAGE.content) ?? 0,
          servedV2During: servedV2,
          machinesAfter: machinesAfter.length,
          ...(await machineBusy()),
        },
      });
    }),
};

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export default benchmark;
