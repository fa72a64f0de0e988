/**
 * Wake from suspend → first query. A database with `suspendPolicy {mode: 'suspend',
 * idleSeconds: 10}` is left alone until GET shows `power: suspended` (its server frozen
 * with the cgroup freezer, memory kept); then a new TLS connection and `SELECT 1` are
 * timed: the front sees the connection, thaws the server and pipes the bytes on. Baseline,
 * in the same run: the same new connection + `SELECT 1` on the same database right after,
 * while it runs — so the difference is the cost of waking.
 *
 * Each cycle needs 10 s of idleness (the policy's minimum) and the sleep ticker runs every
 * second. For context, a second database with `mode: 'stop'` sleeps alongside and is woken
 * right after (its server is started again); it is reported in `notes`, not compared.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { compare, type Benchmark } from './lib/benchmark.js';
import {
  openDbBench,
  pierClient,
  pierQuery,
  timedFirstQuery,
  type DbBench,
} from './lib/db-pier.js';
import {
  asLoad,
  describeSample,
  describeSamples,
  fmtMs,
  sampleNotes,
  Stopwatch,
  type Sample,
} from './lib/db-samples.js';
import { machineBusy } from './lib/s3-load.js';

const CYCLES = Number(process.env.BENCH_DB_SAMPLES ?? 3);
/** New connections timed on the running database after each wake. */
const RUNNING_PER_CYCLE = 3;
const IDLE_SECONDS = 10;
/** The goal: the first query of a suspended database within 100 ms. */
const GOAL_MS = 100;

async function power(b: DbBench, name: string): Promise<string> {
  return ((await b.api('GET', `/v1/resources/${name}`)) as { power: string }).power;
}

/** Polls GET (which is not traffic to the database) until every database is asleep. */
async function waitAsleep(b: DbBench, names: string[]): Promise<Record<string, string>> {
  const deadline = Date.now() + (IDLE_SECONDS + 60) * 1000;
  for (;;) {
    const states: Record<string, string> = {};
    for (const n of names) states[n] = await power(b, n);
    if (Object.values(states).every((p) => p !== 'running')) return states;
    if (Date.now() > deadline) throw new Error(`not asleep in time: ${JSON.stringify(states)}`);
    await sleep(200);
  }
}

async function connectAndSelect(url: string, ca: string): Promise<Sample> {
  const watch = new Stopwatch();
  await timedFirstQuery(pierClient(url, ca), watch);
  return watch.done();
}

const benchmark: Benchmark = {
  name: 'db-wake',
  description: `new connection + SELECT 1 on a suspended database vs on the same one running, ${CYCLES} cycles of ${IDLE_SECONDS} s idle`,
  async run() {
    const b = await openDbBench();
    try {
      const create = (name: string, mode: string) =>
        b.api(
          'POST',
          '/v1/resources',
          { name, kind: 'postgres', suspendPolicy: { mode, idleSeconds: IDLE_SECONDS } },
          201,
        ) as Promise<{ url: string }>;
      const nap = (await create('nap', 'suspend')).url;
      const halt = (await create('halt', 'stop')).url;
      await pierQuery(nap, b.ca, 'CREATE TABLE t AS SELECT 42 AS answer');
      await pierQuery(halt, b.ca, 'CREATE TABLE t AS SELECT 42 AS answer');

      const woken: Sample[] = [];
      const running: Sample[] = [];
      const started: Sample[] = [];
      let napPower = '';
      for (let i = 1; i <= CYCLES; i++) {
        const slept = new Stopwatch();
        const states = await waitAsleep(b, ['nap', 'halt']);
        slept.step('asleep');
        napPower = states.nap!;
        const w = await connectAndSelect(nap, b.ca);
        woken.push(w);
        const after = await power(b, 'nap');
        if (after !== 'running') throw new Error(`nap is ${after} after a query`);
        const r: Sample[] = [];
        for (let k = 0; k < RUNNING_PER_CYCLE; k++) r.push(await connectAndSelect(nap, b.ca));
        running.push(...r);
        const s = await connectAndSelect(halt, b.ca);
        started.push(s);
        console.log(
          `  #${i} (asleep after ${fmtMs(slept.done().ms)}, nap ${states.nap}, halt ${states.halt}) ` +
            `woken ${describeSample(w)}; running ${r.map((x) => fmtMs(x.ms)).join(', ')}; ` +
            `halt started ${describeSample(s)}`,
        );
      }
      console.log(`  running:   ${describeSamples(running)}`);
      console.log(`  woken:     ${describeSamples(woken)} (goal < ${fmtMs(GOAL_MS)})`);
      console.log(`  (stopped, started again: ${describeSamples(started)})`);
      return compare({
        name: benchmark.name,
        baselineLabel: 'new conn + SELECT 1, running',
        connections: 1,
        baseline: asLoad(running),
        pier: asLoad(woken),
        goal: { minRatio: 0, maxP99Ms: GOAL_MS },
        notes: {
          store: b.pier.store,
          // 'stopped' here means the host has no cgroup freezer: suspend falls back to stop.
          asleepAs: napPower,
          headline:
            'pier = woken from suspend; req/s are operations/s (1000 ÷ mean ms); p99 is the slowest sample',
          ...sampleNotes('running', running),
          ...sampleNotes('woken', woken),
          ...sampleNotes('stoppedStarted', started),
          ...(await machineBusy()),
        },
      });
    } finally {
      await b.close();
    }
  },
};

export default benchmark;
