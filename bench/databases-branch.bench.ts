/**
 * Branch of a 1 GB database → first query. pier: `POST /v1/resources/big/branch` (202),
 * polling GET every 10 ms until `ready`, the one-time URL, then a new TLS connection and
 * `SELECT 1` on the copy. Baseline, in the same run: a full `cp -a` of the data directory
 * of a stopped plain cluster holding the very same 1 GB table, starting the copy, and
 * `SELECT 1` (no TLS, trust). A small database is branched the same way, to show that the
 * time does not depend on the size.
 *
 * Both 1 GB databases are filled the same way (`CREATE TABLE t AS SELECT g, repeat('x',
 * 1000) FROM generate_series(1, 1000000) g`, then `VACUUM ANALYZE t`); the plain one is
 * stopped cleanly (so its copy starts without recovery); pier's source keeps running, as a
 * customer's database does. pier checkpoints a running source just before the snapshot,
 * so the copy's crash recovery replays only what was written since. The first branch right
 * after the fill is reported on its own (it pays for checkpointing the fill), then the
 * measured rounds run: baseline, 1 GB branch, small branch.
 *
 * Before the samples, pier's archiving of the fill's WAL and its background base backups
 * are waited out; after each pier sample, the branch's own first base backup is waited
 * out and the branch deleted. The baseline's copy is not fsynced (which favours it).
 */
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { compare, type Benchmark } from './lib/benchmark.js';
import {
  aroundServer,
  archiveCaughtUp,
  deleteDatabase,
  describeAround,
  openDbBench,
  pierQuery,
  poolRoot,
  quiesce,
  redoOf,
  serverSpan,
  settleDisk,
  timedCopy,
  timedFirstQuery,
  volumes,
  type DbBench,
  type Redo,
} from './lib/db-pier.js';
import { copyTree, plainCluster, PlainServer } from './lib/db-plain.js';
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
import { machineBusy } from './lib/s3-load.js';

const ROUNDS = Number(process.env.BENCH_DB_SAMPLES ?? 3);
const ROWS = Number(process.env.BENCH_DB_BRANCH_ROWS ?? 1_000_000);
const FILL = `CREATE TABLE t AS SELECT g, repeat('x', 1000) AS pad FROM generate_series(1, ${ROWS}) g`;
/**
 * After a bulk load, autovacuum would soon read the whole table, set its hint bits and
 * visibility map and, with data checksums on, write about as much WAL again; that runs
 * here, on both sides, before anything is measured.
 */
const VACUUM = 'VACUUM ANALYZE t';
const SMALL_FILL = `CREATE TABLE t AS SELECT g, repeat('x', 1000) AS pad FROM generate_series(1, 1000) g`;
/** The goal: a branch answers its first query within 1 s, whatever the size. */
const GOAL_MS = 1000;
/**
 * "Independent of size": on the means, the 1 GB branch takes no longer than the small one
 * plus 25 % of it or 100 ms, whichever is more.
 */
function sizeIndependent(bigMs: number, smallMs: number): boolean {
  return bigMs - smallMs <= Math.max(0.25 * smallMs, 100);
}

const SIZE_SQL = 'SELECT pg_database_size(current_database())::bigint AS bytes';
const gb = (bytes: number) => `${(bytes / 1024 ** 3).toFixed(2)} GiB`;

interface PierSources {
  big: string;
  small: string;
  bigBytes: number;
  /** The pool volumes of their servers. */
  bigVolume: string;
  smallVolume: string;
}

/** Creates `name` and answers its URL and the volume of its server (the one that appeared). */
async function createSource(b: DbBench, name: string): Promise<{ url: string; volume: string }> {
  const before = new Set(await volumes(b.pier.dataDir));
  const { url } = (await b.api('POST', '/v1/resources', { name, kind: 'postgres' }, 201)) as {
    url: string;
  };
  const made = (await volumes(b.pier.dataDir)).filter((v) => !before.has(v) && v.startsWith('pg-'));
  if (made.length !== 1) throw new Error(`cannot tell the volume of ${name}: ${made.join(', ')}`);
  return { url, volume: made[0]! };
}

/** The 1 GB pier source and a small one, filled. */
async function pierSources(b: DbBench): Promise<PierSources> {
  const big = await createSource(b, 'big');
  const small = await createSource(b, 'small');
  await pierQuery(small.url, b.ca, SMALL_FILL);
  await pierQuery(small.url, b.ca, VACUUM);
  await pierQuery(big.url, b.ca, FILL);
  await pierQuery(big.url, b.ca, VACUUM);
  const [size] = await pierQuery<{ bytes: string }>(big.url, b.ca, SIZE_SQL);
  return {
    big: big.url,
    small: small.url,
    bigBytes: Number(size!.bytes),
    bigVolume: big.volume,
    smallVolume: small.volume,
  };
}

/** A stopped plain cluster holding the same table, in a temp dir. */
async function plainSource(): Promise<{ dir: string; pgdata: string; bytes: number }> {
  const { dir, pgdata } = await plainCluster('pier-bench-db-branch-');
  try {
    const server = await PlainServer.start(pgdata);
    try {
      await server.query(FILL);
      await server.query(VACUUM);
      const [size] = await server.query<{ bytes: string }>(SIZE_SQL);
      return { dir, pgdata, bytes: Number(size!.bytes) };
    } finally {
      await server.stop('fast');
    }
  } catch (err) {
    await rm(dir, { recursive: true, force: true });
    throw err;
  }
}

/** cp -a of the stopped cluster, start the copy, SELECT 1; then stop and remove (not timed). */
async function plainSample(
  b: DbBench,
  src: { dir: string; pgdata: string },
  i: number,
): Promise<Sample> {
  const copy = path.join(src.dir, `copy-${i}`);
  let server: PlainServer | undefined;
  await settleDisk(b.pier.dataDir);
  try {
    const watch = new Stopwatch();
    await copyTree(src.pgdata, copy);
    watch.step('cp -a');
    server = await PlainServer.start(copy);
    watch.step('start');
    await timedFirstQuery(server.client(), watch);
    return watch.done();
  } finally {
    await server?.stop('immediate');
    await rm(copy, { recursive: true, force: true });
    await rm(`${copy}.log`, { force: true });
  }
}

interface PierSample {
  sample: Sample;
  /** Before, during and after the branch's server start (from its log), up to `ready`. */
  where?: Record<string, number>;
  /** The crash recovery of the branch's first start, from its log. */
  redo?: Redo;
  /** How long pier's background work after the branch (its first base backup) took. */
  afterMs: number;
}

/** A branch of `source` → first query; its redo read from its log; then deleted. */
async function pierSample(b: DbBench, source: string, name: string): Promise<PierSample> {
  await settleDisk(b.pier.dataDir);
  const before = new Set(await volumes(b.pier.dataDir));
  const { watch } = await timedCopy(b, source, 'branch', { name });
  const sample = watch.done();
  const made = (await volumes(b.pier.dataDir)).filter((v) => !before.has(v) && v.startsWith('pg-'));
  const redo = made[0] ? await redoOf(b.pier.dataDir, made[0]) : undefined;
  const span = made[0] ? await serverSpan(b.pier.dataDir, made[0]) : undefined;
  const where = aroundServer(watch.epoch(), watch.epoch('ready'), span);
  const afterMs = await quiesce(b.pier.dataDir);
  await deleteDatabase(b, name);
  return { sample, redo, where, afterMs };
}

/** Mean of each part of `where` over the samples that have one, for `notes`. */
function whereNotes(prefix: string, samples: PierSample[]): Record<string, number> {
  const w = samples
    .filter((x) => x.where)
    .map((x) => ({ ms: x.sample.parts['202']! + x.sample.parts.ready!, parts: x.where! }));
  return w.length ? sampleNotes(prefix, w) : {};
}

const describeRedo = (r?: Redo) =>
  r ? `crash recovery replayed ${Math.round(r.mb)} MB of WAL in ${fmtMs(r.ms)}` : 'no redo logged';

const benchmark: Benchmark = {
  name: 'db-branch',
  description: `branch of a 1 GB database → first SELECT 1 vs cp -a of a stopped 1 GB cluster + start, ${ROUNDS} rounds`,
  async run() {
    const b = await openDbBench();
    let plainDir: string | undefined;
    try {
      const fillWatch = new Stopwatch();
      const [pierFill, plainFill] = await Promise.allSettled([pierSources(b), plainSource()]);
      if (plainFill.status === 'fulfilled') plainDir = plainFill.value.dir;
      if (pierFill.status === 'rejected') throw pierFill.reason;
      if (plainFill.status === 'rejected') throw plainFill.reason;
      const pierSrc = pierFill.value;
      const plainSrc = plainFill.value;
      fillWatch.step('fill');
      console.log(
        `  filled in ${fmtMs(fillWatch.done().ms)}: pier 'big' ${gb(pierSrc.bigBytes)}, ` +
          `plain cluster ${gb(plainSrc.bytes)}`,
      );
      const settle = new Stopwatch();
      await archiveCaughtUp(pierSrc.big, b.ca);
      await archiveCaughtUp(pierSrc.small, b.ca);
      await quiesce(b.pier.dataDir);
      settle.step('settle');
      console.log(`  pier archived the fill's WAL in ${fmtMs(settle.done().ms)} more`);

      // Right after the 1 GB write: this branch's checkpoint flushes what the fill left.
      const fresh = await pierSample(b, 'big', 'big-fresh');
      console.log(
        `  pier 1 GB branch right after the fill: ${describeSample(fresh.sample)}; ${describeRedo(fresh.redo)}`,
      );
      console.log(`       202 → ready: ${describeAround(fresh.where, 'ready')}`);

      const plain: Sample[] = [];
      const big: PierSample[] = [];
      const small: PierSample[] = [];
      for (let i = 1; i <= ROUNDS; i++) {
        const p = await plainSample(b, plainSrc, i);
        plain.push(p);
        const g = await pierSample(b, 'big', `big-br-${i}`);
        big.push(g);
        const s = await pierSample(b, 'small', `small-br-${i}`);
        small.push(s);
        console.log(`  #${i} baseline (cp -a 1 GB) ${describeSample(p)}`);
        console.log(`     pier 1 GB branch ${describeSample(g.sample)}; ${describeRedo(g.redo)}`);
        console.log(`       202 → ready: ${describeAround(g.where, 'ready')}`);
        console.log(`     pier small branch ${describeSample(s.sample)}; ${describeRedo(s.redo)}`);
        console.log(`       202 → ready: ${describeAround(s.where, 'ready')}`);
        console.log(
          `     (the branches' first base backups took ${fmtMs(g.afterMs)} and ${fmtMs(s.afterMs)} after ready)`,
        );
      }
      const bigSamples = big.map((x) => x.sample);
      const smallSamples = small.map((x) => x.sample);
      const bigMean = mean(bigSamples.map((s) => s.ms));
      const smallMean = mean(smallSamples.map((s) => s.ms));
      const independent = sizeIndependent(bigMean, smallMean);
      console.log(`  baseline:         ${describeSamples(plain)}`);
      console.log(`  pier 1 GB branch: ${describeSamples(bigSamples)} (goal < ${fmtMs(GOAL_MS)})`);
      console.log(
        `  pier small:       ${describeSamples(smallSamples)}; 1 GB − small = ${fmtMs(bigMean - smallMean)} ` +
          `(${independent ? '' : 'NOT '}independent of size)`,
      );

      const result = compare({
        name: benchmark.name,
        baselineLabel: 'cp -a 1 GB + start + SELECT 1',
        connections: 1,
        baseline: asLoad(plain),
        pier: asLoad(bigSamples),
        goal: { minRatio: 0, maxP99Ms: GOAL_MS },
        notes: {
          store: b.pier.store,
          pool: (await poolRoot(b.pier.dataDir)).kind,
          headline:
            'pier = the 1 GB branch of a running source; req/s are operations/s ' +
            '(1000 ÷ mean ms); p99 is the slowest sample',
          pierSourceBytes: pierSrc.bigBytes,
          plainSourceBytes: plainSrc.bytes,
          sizeIndependent: independent ? 'yes' : 'no',
          bigMinusSmallMs: round(bigMean - smallMean),
          ...sampleNotes('baseline', plain),
          ...sampleNotes('pier1GB', bigSamples),
          ...sampleNotes('pierSmall', smallSamples),
          ...sampleNotes('pier1GBRightAfterFill', [fresh.sample]),
          pier1GBRightAfterFill_redoMB: round(fresh.redo?.mb ?? 0),
          pier1GBRightAfterFill_redoMs: round(fresh.redo?.ms ?? 0),
          pier1GB_redoMB: round(mean(big.map((x) => x.redo?.mb ?? 0))),
          ...whereNotes('pier1GBReady', big),
          ...whereNotes('pierSmallReady', small),
          pier1GB_baseBackupAfterReadyMs: round(mean(big.map((x) => x.afterMs))),
          ...(await machineBusy()),
        },
      });
      // The goal is two-fold: under 1 s, and independent of size.
      return { ...result, goalMet: result.goalMet && independent };
    } finally {
      if (plainDir) await rm(plainDir, { recursive: true, force: true });
      await b.close();
    }
  },
};

export default benchmark;
