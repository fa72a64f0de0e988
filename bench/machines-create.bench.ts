/**
 * Create → first proxied response. pier: `POST /v1/apps/:app/machines` (waits for
 * `running`: the port accepts connections), then GETs through pier's proxy (Host
 * `<app>.127.0.0.1`, a new connection each) until the first 200. Baseline, in the same
 * run: the same busybox binary started with a plain fork+exec on a free port, polled the
 * same way until its first 200.
 *
 * The image is cached: one unmeasured create first pulls it (and opens the storage pool
 * and makes the bridge); that time is reported on its own. Then the samples alternate
 * baseline, pier, baseline, pier..., each machine in an app of its own and destroyed
 * after its sample (untimed).
 */
import { compare, type Benchmark } from './lib/benchmark.js';
import {
  asLoad,
  describeSample,
  describeSamples,
  fmtMs,
  round,
  sampleNotes,
  Stopwatch,
  type Sample,
} from './lib/db-samples.js';
import {
  createTimeline,
  describeTimeline,
  firstOk,
  openMachineBench,
  proxiedGet,
  writePage,
  type MachinePier,
} from './lib/machine-pier.js';
import { assertSameBinary, plainSample } from './lib/machine-plain.js';
import { machineBusy } from './lib/s3-load.js';

const SAMPLES = Number(process.env.BENCH_MACHINES_SAMPLES ?? 10);
/** The goal: create to first response under 300 ms, image cached. */
const GOAL_MS = 300;

async function pierSample(b: MachinePier, app: string) {
  await b.createApp(app);
  const sentAt = Date.now();
  const watch = new Stopwatch();
  const m = await b.createMachine(app);
  watch.step('POST 201');
  const answeredAt = Date.now();
  const tries = await firstOk(() => proxiedGet(b.url, app));
  watch.step('first proxied 200');
  return {
    sample: watch.done(),
    id: m.id as string,
    tries,
    where: createTimeline(sentAt, answeredAt, m),
  };
}

const benchmark: Benchmark = {
  name: 'machines-create',
  description: `POST /v1/apps/:app/machines → first 200 through the proxy vs fork+exec of the same busybox httpd → first 200, ${SAMPLES} samples each`,
  async run() {
    const b = await openMachineBench('machines-create');
    try {
      const www = `${b.workDir}/www`;
      await writePage(www);

      const first = await pierSample(b, 'warm');
      console.log(
        `  pier first create (image pull, pool open, bridge): ${describeSample(first.sample)}`,
      );
      const digest = await assertSameBinary(b.machineRoot(first.id));
      await b.api('POST', `/v1/machines/${first.id}/destroy`);
      const plainWarm = await plainSample(www);
      console.log(`  baseline warm-up: ${describeSample(plainWarm)}`);

      const plain: Sample[] = [];
      const pier: Sample[] = [];
      const where: Sample[] = [];
      for (let i = 1; i <= SAMPLES; i++) {
        const p = await plainSample(www);
        plain.push(p);
        const s = await pierSample(b, `create-${i}`);
        pier.push(s.sample);
        where.push({ ms: s.sample.parts['POST 201']!, parts: s.where });
        console.log(`  #${i} baseline ${describeSample(p)}`);
        console.log(`     pier ${describeSample(s.sample)} (${s.tries} GET)`);
        console.log(`       POST: ${describeTimeline(s.where)}`);
        await b.api('POST', `/v1/machines/${s.id}/destroy`);
      }
      console.log(`  baseline: ${describeSamples(plain)}`);
      console.log(`  pier:     ${describeSamples(pier)} (goal < ${fmtMs(GOAL_MS)})`);

      return compare({
        name: benchmark.name,
        baselineLabel: 'fork+exec busybox httpd → 200',
        connections: 1,
        baseline: asLoad(plain),
        pier: asLoad(pier),
        // Absolute: every sample (the p99 of a few is the slowest) under 300 ms.
        goal: { minRatio: 0, maxP99Ms: GOAL_MS },
        notes: {
          store: b.store,
          headline: 'req/s are operations/s (1000 ÷ mean ms); p99 is the slowest sample',
          busyboxSha256: digest,
          pierFirstCreateMs: round(first.sample.ms),
          ...sampleNotes('baseline', plain),
          ...sampleNotes('pier', pier),
          ...sampleNotes('pierPOST', where),
          ...(await machineBusy()),
        },
      });
    } finally {
      await b.close();
    }
  },
};

export default benchmark;
