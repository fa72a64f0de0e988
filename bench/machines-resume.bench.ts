/**
 * Resume from suspended → first response. A machine is suspended with
 * `POST /v1/machines/:id/suspend` (its cgroup frozen, memory kept; untimed), then a GET
 * through pier's proxy on a new connection is timed until its 200: the proxy finds no
 * running machine, wakes the suspended one (a start of a suspended machine thaws its
 * cgroup and records `running`), resolves the app again and forwards. Baseline, in the
 * same run: the same GET through the proxy to the same machine while it runs, three
 * after each wake, so the difference is the cost of waking.
 *
 * For context (in `notes`, not compared): a plain busybox httpd stopped with SIGSTOP,
 * then SIGCONT + GET → 200, the cheapest "resume" a process can have.
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
import { plainStopCont } from './lib/machine-plain.js';
import { machineBusy } from './lib/s3-load.js';

const CYCLES = Number(process.env.BENCH_MACHINES_SAMPLES ?? 10);
/** Proxied GETs timed on the running machine after each wake. */
const RUNNING_PER_CYCLE = 3;
/** The goal: resume to first response under 50 ms. */
const GOAL_MS = 50;
const APP = 'nap';

async function state(b: MachinePier, id: string): Promise<string> {
  return ((await b.api('GET', `/v1/machines/${id}`)) as { observedState: string }).observedState;
}

async function suspend(b: MachinePier, id: string): Promise<number> {
  const watch = new Stopwatch();
  const m = await b.api('POST', `/v1/machines/${id}/suspend`);
  if (m.observedState !== 'suspended') {
    throw new Error(`suspend left the machine ${m.observedState}`);
  }
  watch.step('done');
  return watch.done().ms;
}

async function timedGet(b: MachinePier, step: string): Promise<Sample> {
  const watch = new Stopwatch();
  const tries = await firstOk(() => proxiedGet(b.url, APP));
  if (tries !== 1) throw new Error(`the proxied GET needed ${tries} tries`);
  watch.step(step);
  return watch.done();
}

const benchmark: Benchmark = {
  name: 'machines-resume',
  description: `GET through the proxy that wakes a suspended machine → 200 vs the same GET to it running, ${CYCLES} cycles`,
  async run() {
    const b = await openMachineBench('machines-resume');
    try {
      const www = `${b.workDir}/www`;
      await writePage(www);
      await b.createApp(APP);
      const id = (await b.createMachine(APP)).id as string;
      // Warm-up: the proxy's path and the wake path once each.
      await timedGet(b, 'warm');
      await suspend(b, id);
      console.log(`  pier warm-up wake: ${describeSample(await timedGet(b, 'woken'))}`);

      const woken: Sample[] = [];
      const running: Sample[] = [];
      const suspends: number[] = [];
      for (let i = 1; i <= CYCLES; i++) {
        suspends.push(await suspend(b, id));
        await new Promise((r) => setTimeout(r, 200));
        const w = await timedGet(b, 'wake → 200');
        woken.push(w);
        const after = await state(b, id);
        if (after !== 'running') throw new Error(`the machine is ${after} after a proxied GET`);
        const r: Sample[] = [];
        for (let k = 0; k < RUNNING_PER_CYCLE; k++) r.push(await timedGet(b, 'running → 200'));
        running.push(...r);
        console.log(
          `  #${i} woken ${fmtMs(w.ms)}; running ${r.map((x) => fmtMs(x.ms)).join(', ')}`,
        );
      }
      const stopCont = await plainStopCont(www, CYCLES);
      console.log(`  running:    ${describeSamples(running)}`);
      console.log(`  woken:      ${describeSamples(woken)} (goal < ${fmtMs(GOAL_MS)})`);
      console.log(`  (plain SIGSTOP/SIGCONT + GET: ${describeSamples(stopCont)})`);
      console.log(`  (POST suspend, untimed by the comparison: mean ${fmtMs(mean(suspends))})`);

      return compare({
        name: benchmark.name,
        baselineLabel: 'proxied GET, machine running',
        connections: 1,
        baseline: asLoad(running),
        pier: asLoad(woken),
        goal: { minRatio: 0, maxP99Ms: GOAL_MS },
        notes: {
          store: b.store,
          headline:
            'pier = GET that wakes a suspended machine; req/s are operations/s (1000 ÷ mean ms); p99 is the slowest sample',
          suspendMeanMs: round(mean(suspends)),
          ...sampleNotes('running', running),
          ...sampleNotes('woken', woken),
          ...sampleNotes('plainStopCont', stopCont),
          ...(await machineBusy()),
        },
      });
    } finally {
      await b.close();
    }
  },
};

export default benchmark;
