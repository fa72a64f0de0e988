/**
 * Fork to a moment → first query. Both sides hold the same history: a base backup of the
 * fresh database, then a table of 100,000 rows, then in each round a few seconds of small
 * commits with the moment T in their middle. A round forks as of T, a few seconds back:
 *
 * - pier: `POST /v1/resources/src/fork {asOf: T}` (202), polling GET every 10 ms until
 *   `ready`, the one-time URL, a new TLS connection and `SELECT 1`. pier ships the
 *   source's current WAL segment to the archive, copies the base backup, replays the
 *   archive up to T, waits for the promotion and sets the copy's password.
 * - baseline, in the same run, by hand on a plain cluster that archives with the same
 *   `basic_archive` module: `pg_switch_wal()` on the source and wait until the segment is
 *   in the archive (what pier's flush does), `cp -a` of the `pg_basebackup`,
 *   `recovery.signal` with `restore_command`, `recovery_target_time = T` and
 *   `recovery_target_action = promote` (hot_standby off, as pier), start, wait for the
 *   promotion, connect (no TLS, trust) and `SELECT 1`.
 *
 * Every fork is checked to hold exactly the rows committed up to T (not timed). pier's
 * background work after a fork (its own first base backup) is waited out and the fork
 * deleted before the next sample.
 */
import { readdir, rm, writeFile, chown } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type pg from 'pg';
import { compare, type Benchmark } from './lib/benchmark.js';
import {
  aroundServer,
  deleteDatabase,
  describeAround,
  openDbBench,
  pierClient,
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
import { copyTree, PG_BIN, pierUser, plainCluster, PlainServer, tool } from './lib/db-plain.js';
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

const ROUNDS = Number(process.env.BENCH_DB_SAMPLES ?? 4);
/** Commits of 1,000 rows each, 200 ms apart, before and after T in every round. */
const STEPS_BEFORE = 5;
const STEPS_AFTER = 10;
const STEP_MS = 200;

/** The table and its first 100,000 rows, written after the base backup. */
async function firstData(c: pg.Client): Promise<void> {
  await c.query(`CREATE TABLE items (id bigserial PRIMARY KEY, at timestamptz NOT NULL
    DEFAULT clock_timestamp(), pad text NOT NULL)`);
  await c.query(`INSERT INTO items (pad) SELECT repeat('x', 100) FROM generate_series(1, 100000)`);
}

/** One round of commits around T; answers T and how many rows were committed up to it. */
async function roundOfCommits(c: pg.Client): Promise<{ t: Date; rows: number }> {
  const commit = () =>
    c.query(`INSERT INTO items (pad) SELECT repeat('y', 100) FROM generate_series(1, 1000)`);
  for (let i = 0; i < STEPS_BEFORE; i++) {
    await commit();
    await sleep(STEP_MS);
  }
  // One statement: the count and the moment, with no commit of ours in between.
  const { rows } = await c.query<{ n: number; t: Date }>(
    'SELECT count(*)::int AS n, clock_timestamp() AS t FROM items',
  );
  for (let i = 0; i < STEPS_AFTER; i++) {
    await sleep(STEP_MS);
    await commit();
  }
  return { t: rows[0]!.t, rows: rows[0]!.n };
}

async function countRows(c: pg.Client): Promise<number> {
  await c.connect();
  try {
    return (await c.query<{ n: number }>('SELECT count(*)::int AS n FROM items')).rows[0]!.n;
  } finally {
    await c.end();
  }
}

/** recovery_target_time for `at`, as pier writes it. */
const recoveryTime = (at: Date) => at.toISOString().replace('T', ' ').replace('Z', '+00');

/** The plain source: archiving with basic_archive, a base backup of it when fresh. */
interface PlainSource {
  dir: string;
  server: PlainServer;
  wal: string;
  base: string;
}

async function plainSource(): Promise<PlainSource> {
  const { dir, pgdata } = await plainCluster('pier-bench-db-fork-');
  const u = await pierUser();
  const wal = path.join(dir, 'wal');
  const base = path.join(dir, 'base');
  try {
    await tool('mkdir', ['-m', '0700', wal], u);
    const server = await PlainServer.start(pgdata, {
      archive_mode: 'on',
      archive_library: 'basic_archive',
      'basic_archive.archive_directory': wal,
    });
    try {
      await tool(
        path.join(PG_BIN, 'pg_basebackup'),
        [...['-D', base, '-X', 'stream', '-c', 'fast', '--no-password'], '-h', '127.0.0.1'].concat([
          '-p',
          String(server.port),
          '-U',
          'postgres',
        ]),
        u,
      );
      const c = server.client();
      await c.connect();
      try {
        await firstData(c);
      } finally {
        await c.end();
      }
      return { dir, server, wal, base };
    } catch (err) {
      await server.stop('immediate');
      throw err;
    }
  } catch (err) {
    await rm(dir, { recursive: true, force: true });
    throw err;
  }
}

/** Ships the current WAL segment of the plain source and waits until it is archived. */
async function switchAndWait(src: PlainSource): Promise<void> {
  const [r] = await src.server.query<{ f: string }>('SELECT pg_walfile_name(pg_switch_wal()) AS f');
  const deadline = Date.now() + 120_000;
  while (!(await readdir(src.wal)).includes(r!.f)) {
    if (Date.now() > deadline) throw new Error(`${r!.f} was not archived in time`);
    await sleep(10);
  }
}

/** The restore by hand, timed; the copy is checked, stopped and removed afterwards. */
async function plainSample(
  src: PlainSource,
  i: number,
  at: { t: Date; rows: number },
): Promise<Sample> {
  const copy = path.join(src.dir, `restore-${i}`);
  let server: PlainServer | undefined;
  try {
    const watch = new Stopwatch();
    await switchAndWait(src);
    watch.step('ship WAL');
    await copyTree(src.base, copy);
    const u = await pierUser();
    const signal = path.join(copy, 'recovery.signal');
    await writeFile(signal, '', { mode: 0o600 });
    await chown(signal, u.uid, u.gid);
    watch.step('cp -a base');
    server = await PlainServer.start(copy, {
      restore_command: `cp '${src.wal}'/%f %p`,
      recovery_target_time: recoveryTime(at.t),
      recovery_target_inclusive: 'on',
      recovery_target_action: 'promote',
      hot_standby: 'off',
      archive_mode: 'off',
    });
    watch.step('replay + promote');
    await timedFirstQuery(server.client(), watch);
    const sample = watch.done();
    const rows = await countRows(server.client());
    if (rows !== at.rows) throw new Error(`the restore holds ${rows} rows, not ${at.rows}`);
    return sample;
  } finally {
    await server?.stop('immediate');
    await rm(copy, { recursive: true, force: true });
    await rm(`${copy}.log`, { force: true });
  }
}

/** Waits for the first complete base backup in an archive volume that `before` lacked. */
async function firstBaseBackup(b: DbBench, before: Set<string>): Promise<void> {
  const { root } = await poolRoot(b.pier.dataDir);
  const deadline = Date.now() + 120_000;
  for (;;) {
    for (const v of (await volumes(b.pier.dataDir)).filter((n) => !before.has(n))) {
      const bases = await readdir(path.join(root, v, 'base')).catch(() => [] as string[]);
      if (bases.some((f) => f.endsWith('.json'))) return;
    }
    if (Date.now() > deadline) throw new Error('the first base backup did not come');
    await sleep(100);
  }
}

interface PierSample {
  sample: Sample;
  redo?: Redo;
  /** Before, during and after the fork's server start (from its log), up to `ready`. */
  where?: Record<string, number>;
}

/** A fork as of T → first query, checked; its background base backup waited out; deleted. */
async function pierSample(
  b: DbBench,
  name: string,
  at: { t: Date; rows: number },
): Promise<PierSample> {
  const before = new Set(await volumes(b.pier.dataDir));
  const { watch, url } = await timedCopy(b, 'src', 'fork', { name, asOf: at.t.toISOString() });
  const sample = watch.done();
  const rows = await countRows(pierClient(url, b.ca));
  if (rows !== at.rows) throw new Error(`the fork holds ${rows} rows, not ${at.rows}`);
  const made = (await volumes(b.pier.dataDir)).filter((v) => !before.has(v) && v.startsWith('pg-'));
  const redo = made[0] ? await redoOf(b.pier.dataDir, made[0]) : undefined;
  const span = made[0] ? await serverSpan(b.pier.dataDir, made[0]) : undefined;
  const where = aroundServer(watch.epoch(), watch.epoch('ready'), span);
  await quiesce(b.pier.dataDir);
  await deleteDatabase(b, name);
  return { sample, redo, where };
}

/** Mean of each part of `where` over the samples that have one, for `notes`. */
function whereNotes(prefix: string, samples: PierSample[]): Record<string, number> {
  const w = samples
    .filter((x) => x.where)
    .map((x) => ({ ms: x.sample.parts['202']! + x.sample.parts.ready!, parts: x.where! }));
  return w.length ? sampleNotes(prefix, w) : {};
}

const benchmark: Benchmark = {
  name: 'db-fork',
  description: `fork as of a moment seconds back → first SELECT 1 vs restoring a pg_basebackup to recovery_target_time by hand, ${ROUNDS} rounds`,
  async run() {
    const b = await openDbBench();
    let plain: PlainSource | undefined;
    try {
      const setup = new Stopwatch();
      const before = new Set(await volumes(b.pier.dataDir));
      const { url } = (await b.api(
        'POST',
        '/v1/resources',
        { name: 'src', kind: 'postgres' },
        201,
      )) as { url: string };
      await firstBaseBackup(b, before);
      await quiesce(b.pier.dataDir);
      plain = await plainSource();
      // Errors after connect (a server going away at cleanup) are the query's to report.
      const pierSrc = pierClient(url, b.ca).on('error', () => {});
      const plainSrc = plain.server.client().on('error', () => {});
      try {
        await pierSrc.connect();
        await plainSrc.connect();
        await firstData(pierSrc);
        setup.step('setup');
        console.log(`  both sources made, base-backed-up and loaded in ${fmtMs(setup.done().ms)}`);

        const base: Sample[] = [];
        const forks: PierSample[] = [];
        for (let i = 1; i <= ROUNDS; i++) {
          const plainAt = await roundOfCommits(plainSrc);
          await settleDisk(b.pier.dataDir);
          const p = await plainSample(plain, i, plainAt);
          base.push(p);
          const pierAt = await roundOfCommits(pierSrc);
          await settleDisk(b.pier.dataDir);
          const f = await pierSample(b, `src-fork-${i}`, pierAt);
          forks.push(f);
          const replay = f.redo
            ? `; replayed ${Math.round(f.redo.mb)} MB of WAL in ${fmtMs(f.redo.ms)}`
            : '';
          console.log(`  #${i} baseline ${describeSample(p)}`);
          console.log(`     pier ${describeSample(f.sample)}${replay}`);
          console.log(`       202 → ready: ${describeAround(f.where, 'ready')}`);
        }
        const pierSamples = forks.map((f) => f.sample);
        console.log(`  baseline: ${describeSamples(base)}`);
        console.log(`  pier:     ${describeSamples(pierSamples)}`);
        return compare({
          name: benchmark.name,
          baselineLabel: 'restore pg_basebackup to T by hand',
          connections: 1,
          baseline: asLoad(base),
          pier: asLoad(pierSamples),
          // No goal was set for forks; this one asks that pier be no slower than by hand.
          goal: { minRatio: 1, maxP99Ms: Infinity },
          notes: {
            store: b.pier.store,
            pool: (await poolRoot(b.pier.dataDir)).kind,
            headline: 'req/s are operations/s (1000 ÷ mean ms); p99 is the slowest sample',
            ...sampleNotes('baseline', base),
            ...sampleNotes('pier', pierSamples),
            ...whereNotes('pierReady', forks),
            pier_redoMB: round(mean(forks.map((f) => f.redo?.mb ?? 0))),
            pier_redoMs: round(mean(forks.map((f) => f.redo?.ms ?? 0))),
            ...(await machineBusy()),
          },
        });
      } finally {
        await pierSrc.end().catch(() => {});
        await plainSrc.end().catch(() => {});
      }
    } finally {
      if (plain) {
        await plain.server.stop('immediate');
        await rm(plain.dir, { recursive: true, force: true });
      }
      await b.close();
    }
  },
};

export default benchmark;
