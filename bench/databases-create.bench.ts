/**
 * Create → first query. pier: `POST /v1/resources {kind: 'postgres'}` (201 with the URL),
 * then a new connection over TLS through the returned URL (verifying the platform CA,
 * SCRAM) and `SELECT 1`. Baseline, in the same run: what an operator does by hand for a
 * new server, as the pier user in a temp dir: `initdb`, start `postgres` and wait until
 * it is ready, connect over TCP (no TLS, trust) and `SELECT 1`.
 *
 * One unmeasured create comes first on each side: pier builds its template cluster on the
 * first create of a locale (and opens its storage pool), and that time is reported on its
 * own. Then the samples alternate baseline, pier, baseline, pier... pier's background work
 * after a create (the first base backup into the new database's archive) is waited out
 * between samples, and each database is deleted before the next sample.
 */
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { compare, type Benchmark } from './lib/benchmark.js';
import {
  aroundServer,
  deleteDatabase,
  describeAround,
  openDbBench,
  pierClient,
  poolRoot,
  quiesce,
  serverSpan,
  settleDisk,
  timedFirstQuery,
  volumes,
  type DbBench,
} from './lib/db-pier.js';
import { initdb, pierTempDir, PlainServer } from './lib/db-plain.js';
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
import { machineBusy } from './lib/s3-load.js';

const SAMPLES = Number(process.env.BENCH_DB_SAMPLES ?? 6);
/** The goal: a new database answers its first query within 1 s. */
const GOAL_MS = 1000;

/** initdb, start, connect, SELECT 1 — then stop and remove (not timed). */
async function plainSample(): Promise<Sample> {
  const dir = await pierTempDir('pier-bench-db-create-');
  let server: PlainServer | undefined;
  try {
    const watch = new Stopwatch();
    const pgdata = path.join(dir, 'pgdata');
    await initdb(pgdata);
    watch.step('initdb');
    server = await PlainServer.start(pgdata);
    watch.step('start');
    await timedFirstQuery(server.client(), watch);
    return watch.done();
  } finally {
    await server?.stop('immediate');
    await rm(dir, { recursive: true, force: true });
  }
}

interface PierSample {
  sample: Sample;
  /** Before, during and after the server's start (from its log). */
  where?: Record<string, number>;
}

/** POST /v1/resources, then connect + SELECT 1 through the URL. */
async function pierSample(b: DbBench, name: string): Promise<PierSample> {
  const before = new Set(await volumes(b.pier.dataDir));
  const watch = new Stopwatch();
  const made = (await b.api('POST', '/v1/resources', { name, kind: 'postgres' }, 201)) as {
    url: string;
  };
  watch.step('POST 201');
  await timedFirstQuery(pierClient(made.url, b.ca), watch);
  const volume = (await volumes(b.pier.dataDir)).find((v) => !before.has(v) && v.startsWith('pg-'));
  const span = volume ? await serverSpan(b.pier.dataDir, volume) : undefined;
  return {
    sample: watch.done(),
    where: aroundServer(watch.epoch(), watch.epoch('POST 201'), span),
  };
}

const benchmark: Benchmark = {
  name: 'db-create',
  description: `POST /v1/resources → first SELECT 1 over TLS vs initdb + start + SELECT 1, ${SAMPLES} samples each`,
  async run() {
    const b = await openDbBench();
    try {
      // Warm-up: pier's first create builds the template (and opens the storage pool).
      const { sample: first } = await pierSample(b, 'warm');
      console.log(`  pier first create (template build, pool open): ${describeSample(first)}`);
      const settledMs = await quiesce(b.pier.dataDir);
      await deleteDatabase(b, 'warm');
      const plainWarm = await plainSample();
      console.log(`  baseline warm-up: ${describeSample(plainWarm)}`);

      const plain: Sample[] = [];
      const pier: Sample[] = [];
      const where: Sample[] = [];
      for (let i = 1; i <= SAMPLES; i++) {
        await settleDisk(b.pier.dataDir);
        const p = await plainSample();
        plain.push(p);
        const name = `create-${i}`;
        await settleDisk(b.pier.dataDir);
        const s = await pierSample(b, name);
        pier.push(s.sample);
        if (s.where) where.push({ ms: s.sample.parts['POST 201']!, parts: s.where });
        console.log(`  #${i} baseline ${describeSample(p)}`);
        console.log(`     pier ${describeSample(s.sample)}`);
        console.log(`       POST: ${describeAround(s.where, 'the 201')}`);
        await quiesce(b.pier.dataDir);
        await deleteDatabase(b, name);
      }
      console.log(`  baseline: ${describeSamples(plain)}`);
      console.log(`  pier:     ${describeSamples(pier)} (goal < ${fmtMs(GOAL_MS)})`);

      const pool = await poolRoot(b.pier.dataDir);
      return compare({
        name: benchmark.name,
        baselineLabel: 'initdb + postgres start + SELECT 1',
        connections: 1,
        baseline: asLoad(plain),
        pier: asLoad(pier),
        // Absolute: every sample (the p99 of a few is the slowest) under 1 s.
        goal: { minRatio: 0, maxP99Ms: GOAL_MS },
        notes: {
          store: b.pier.store,
          pool: pool.kind,
          headline: 'req/s are operations/s (1000 ÷ mean ms); p99 is the slowest sample',
          pierFirstCreateMs: round(first.ms),
          pierFirstCreateSettleMs: settledMs,
          ...sampleNotes('baseline', plain),
          ...sampleNotes('pier', pier),
          ...(where.length ? sampleNotes('pierPOST', where) : {}),
          ...(await machineBusy()),
        },
      });
    } finally {
      await b.close();
    }
  },
};

export default benchmark;
