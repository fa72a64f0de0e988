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
import type { Benchmark } from './lib/benchmark.js';
import {
  describeSample,
  describeSamples,
  fmtMs,
  mean,
  round,
  Stopwatch,
  type Sample,
} from './lib/db-samples.js';
import { compareLatency } from './lib/latency-report.js';
import { timedTransition } from './lib/machine-ops.js';
import {
  firstOk,
  MACHINE_SAMPLES as CYCLES,
  proxiedGet,
  withMachineBench,
  type MachinePier,
} from './lib/machine-pier.js';
import { plainStopCont } from './lib/machine-plain.js';

/** Proxied GETs timed on the running machine after each wake. */
const RUNNING_PER_CYCLE = 3;
/** The goal: resume to first response under 50 ms. */
const GOAL_MS = 50;
const APP = 'nap';

async function state(b: MachinePier, id: string): Promise<string> {
  return ((await b.api('GET', `/v1/machines/${id}`)) as { observedState: string }).observedState;
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
  run: () =>
    withMachineBench('machines-resume', async (b, www) => {
      await b.createApp(APP);
      const id = (await b.createMachine(APP)).id as string;
      const suspend = () => timedTransition(b, id, 'suspend', 'suspended');
      // Warm-up: the proxy's path and the wake path once each.
      await timedGet(b, 'warm');
      await suspend();
      console.log(`  pier warm-up wake: ${describeSample(await timedGet(b, 'woken'))}`);

      const woken: Sample[] = [];
      const running: Sample[] = [];
      const suspends: number[] = [];
      for (let i = 1; i <= CYCLES; i++) {
        suspends.push(await suspend());
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

      return compareLatency({
        name: benchmark.name,
        baselineLabel: 'proxied GET, machine running',
        baseline: running,
        pier: woken,
        names: ['running', 'woken'],
        goalMs: GOAL_MS,
        store: b.store,
        pierIs: 'GET that wakes a suspended machine',
        notes: { suspendMeanMs: round(mean(suspends)) },
        context: { plainStopCont: stopCont },
      });
    }),
};

export default benchmark;
