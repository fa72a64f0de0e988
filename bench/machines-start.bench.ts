/**
 * Start from stopped → first proxied response. pier: a machine is stopped with
 * `POST /v1/machines/:id/stop` (untimed), then `POST /v1/machines/:id/start` (answers once
 * the port accepts connections) and GETs through the proxy until the first 200 are
 * timed. Baseline, in the same run: the same busybox binary with a plain fork+exec, spawn
 * → first 200, as in `machines-create`.
 *
 * A start reuses what the create made (writable layer, netns, cgroup, record) and mounts
 * the overlay again; the process is new. One unmeasured stop/start comes first.
 */
import { compare, type Benchmark } from './lib/benchmark.js';
import {
  asLoad,
  describeSample,
  describeSamples,
  fmtMs,
  mean,
  round,
  sampleNotes,
  Stopwatch,
  type Sample,
} from './lib/db-samples.js';
import {
  firstOk,
  openMachineBench,
  proxiedGet,
  writePage,
  type MachinePier,
} from './lib/machine-pier.js';
import { assertSameBinary, plainSample } from './lib/machine-plain.js';
import { machineBusy } from './lib/s3-load.js';

const SAMPLES = Number(process.env.BENCH_MACHINES_SAMPLES ?? 10);
/**
 * No goal was set for a start; this one is a proposal: a start does less than a create
 * (no image, layer or network to make), so it should meet the create's 300 ms.
 */
const GOAL_MS = 300;

async function stop(b: MachinePier, id: string): Promise<number> {
  const watch = new Stopwatch();
  const m = await b.api('POST', `/v1/machines/${id}/stop`);
  if (m.observedState !== 'stopped') throw new Error(`stop left the machine ${m.observedState}`);
  watch.step('done');
  return watch.done().ms;
}

async function startSample(b: MachinePier, app: string, id: string) {
  const sentAt = Date.now();
  const watch = new Stopwatch();
  const m = await b.api('POST', `/v1/machines/${id}/start`);
  watch.step('POST start');
  if (m.observedState !== 'running') throw new Error(`start left the machine ${m.observedState}`);
  const answeredAt = Date.now();
  const tries = await firstOk(() => proxiedGet(b.url, app));
  watch.step('first proxied 200');
  const ready = m.readyAt ? Date.parse(m.readyAt) : answeredAt;
  const where = {
    toReady: ready - sentAt,
    boot: (m.bootMs as number | undefined) ?? 0,
    readyToAnswer: answeredAt - ready,
  };
  return { sample: watch.done(), tries, where };
}

const benchmark: Benchmark = {
  name: 'machines-start',
  description: `POST /v1/machines/:id/start of a stopped machine → first 200 through the proxy vs fork+exec of the same busybox httpd → first 200, ${SAMPLES} samples each`,
  async run() {
    const b = await openMachineBench('machines-start');
    try {
      const www = `${b.workDir}/www`;
      await writePage(www);
      await b.createApp('start');
      const m = await b.createMachine('start');
      const id = m.id as string;
      const digest = await assertSameBinary(b.machineRoot(id));
      const stops: number[] = [await stop(b, id)];
      const warm = await startSample(b, 'start', id);
      console.log(`  pier warm-up start: ${describeSample(warm.sample)}`);
      console.log(`  baseline warm-up: ${describeSample(await plainSample(www))}`);

      const plain: Sample[] = [];
      const pier: Sample[] = [];
      const where: Sample[] = [];
      for (let i = 1; i <= SAMPLES; i++) {
        const p = await plainSample(www);
        plain.push(p);
        stops.push(await stop(b, id));
        const s = await startSample(b, 'start', id);
        pier.push(s.sample);
        where.push({ ms: s.sample.parts['POST start']!, parts: s.where });
        console.log(`  #${i} baseline ${describeSample(p)}`);
        console.log(`     pier ${describeSample(s.sample)} (${s.tries} GET)`);
        console.log(
          `       POST start: request→ready ${fmtMs(s.where.toReady)} (boot ${fmtMs(s.where.boot)}: ` +
            `sandbox spawn → port open), ready→answer ${fmtMs(s.where.readyToAnswer)}`,
        );
      }
      console.log(`  baseline: ${describeSamples(plain)}`);
      console.log(`  pier:     ${describeSamples(pier)} (proposed goal < ${fmtMs(GOAL_MS)})`);
      console.log(`  (POST stop, untimed by the comparison: mean ${fmtMs(mean(stops))})`);

      return compare({
        name: benchmark.name,
        baselineLabel: 'fork+exec busybox httpd → 200',
        connections: 1,
        baseline: asLoad(plain),
        pier: asLoad(pier),
        goal: { minRatio: 0, maxP99Ms: GOAL_MS },
        notes: {
          store: b.store,
          headline: 'req/s are operations/s (1000 ÷ mean ms); p99 is the slowest sample',
          goalNote: 'no goal in the issue; 300 ms (the create goal) is a proposal',
          busyboxSha256: digest,
          stopMeanMs: round(mean(stops)),
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
