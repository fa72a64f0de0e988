/**
 * Kill -9 at every step of every durable operation (docs/architecture.md, "Jobs").
 *
 * One real `pier serve` on one data dir and one state store serves every round. Each
 * operation is run once cleanly with the crash trace on: the crash points it passes
 * (src/jobs/crash-points.ts: a job's claim, each recorded step ran and recorded, the end
 * of its run, and the points services add) are what it is killed at. Each round arms
 * several points, starts one instance of an operation per point, and once every armed
 * point has stopped its instance SIGKILLs `pier serve`, starts it again unarmed, and
 * asserts that each operation finishes or ends with a reason, and that once its results
 * are removed nothing is left of it: the processes, mounts and pool volumes under the
 * data dir and the rows of the watched tables are those of before, and no job is left
 * running or due.
 *
 * An operation is one `CrashOperation` entry: how to start it, how to tell it finished
 * (or ended with a reason), and how to remove what it made.
 */
import { execFile, type ChildProcess } from 'node:child_process';
import { mkdtemp, readdir, readFile, readlink, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { expect } from 'vitest';
import { freeLoopbackPort } from '../../src/host/ports.js';
import { createTestDatabase, type TestDatabase } from './database.js';
import { request, testIdentityPrefix, type ApiAnswer } from './platform.js';
import { healthy, startServe, type Served } from './serve.js';

export interface CrashOperation<H = unknown> {
  /** What the rounds are called in messages: "database branch". */
  name: string;
  /** The job kinds (crash-point prefixes) of the operation: its rounds are their points. */
  kinds: string[];
  /** Starts the operation (a request); returns what `settle` and `remove` need. */
  start(bed: CrashBed): Promise<H>;
  /**
   * Waits until the operation finished or ended with a reason, and asserts which. Runs
   * on the `pier serve` started again after the crash.
   */
  settle(bed: CrashBed, handle: H): Promise<void>;
  /** Removes what the operation made, so the bed is as before the round. */
  remove(bed: CrashBed, handle: H): Promise<void>;
  /**
   * One point per round: for work of which at most one runs at a time (a periodic job with
   * a dedupe key), so a second instance cannot pass the point the first is frozen at.
   */
  onePerRound?: boolean;
}

/** What must be the same before a round and after it (its results removed). */
export interface BedState {
  /** Processes whose command line or working directory is under the data dir. */
  processes: string[];
  /** Mount points under the data dir. */
  mounts: string[];
  /** Volumes (subvolumes) of the storage pool. */
  volumes: string[];
  /** Row counts of the watched tables. */
  rows: Record<string, number>;
}

export interface CrashBed {
  base: string;
  dataDir: string;
  store: pg.Pool;
  /** The organization's full-access key. */
  token: string;
  orgId: string;
  operatorToken: string;
  /** A request with the organization's key. */
  api<T = any>(method: string, p: string, body?: unknown): Promise<ApiAnswer<T>>;
  /** A request to the operator API. */
  admin<T = any>(method: string, p: string, body?: unknown): Promise<ApiAnswer<T>>;
  /** Starts `pier serve` (if it is not running) and waits until it is healthy. */
  serve(): Promise<void>;
  state(): Promise<BedState>;
  close(): Promise<void>;
}

export interface CrashBedOptions {
  /** Settings of `pier serve` beyond the bed's own (PIER_* variables). */
  env?: Record<string, string>;
  /** Tables whose row count must come back after each round. */
  tables: string[];
}

const execFileP = promisify(execFile);
const OPERATOR = 'operator-token-of-the-crash-harness';
/** A crashed worker's job is taken over once its lease lapses: short, for the rounds' sake. */
const LEASE_MS = 1500;

export async function startCrashBed(opts: CrashBedOptions): Promise<CrashBed> {
  const db: TestDatabase = await createTestDatabase();
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'pier-crashes-'));
  const port = await freeLoopbackPort();
  const base = `http://127.0.0.1:${port}`;
  const traceFile = path.join(os.tmpdir(), `${path.basename(dataDir)}.trace`);
  const armFile = path.join(os.tmpdir(), `${path.basename(dataDir)}.arm`);
  await writeFile(traceFile, '');
  await writeFile(armFile, '');
  const store = new pg.Pool({ connectionString: db.url, max: 2 });
  let served: Served | undefined;

  const alive = (c?: ChildProcess) => !!c && c.exitCode === null && c.signalCode === null;
  const bed: CrashBed & {
    served(): Served | undefined;
    traceFile: string;
    armFile: string;
  } = {
    base,
    dataDir,
    store,
    token: '',
    orgId: '',
    operatorToken: OPERATOR,
    traceFile,
    armFile,
    served: () => served,
    api: (method, p, body) => request(base, method, p, { token: bed.token, body }),
    admin: (method, p, body) => request(base, method, p, { token: OPERATOR, body }),
    async serve() {
      if (alive(served?.child)) return;
      served = startServe(['--listen', `127.0.0.1:${port}`, '--data-dir', dataDir], {
        env: {
          PIER_DATABASE_URL: db.url,
          PIER_OPERATOR_TOKEN: OPERATOR,
          PIER_JOB_LEASE_MS: String(LEASE_MS),
          // Frozen operations hold their job slots until the kill; the rest need some too.
          PIER_JOB_CONCURRENCY: '24',
          PIER_LOG_LEVEL: 'warn',
          PIER_DATABASE_USER_PREFIX: testIdentityPrefix(),
          PIER_TEST_CRASH_TRACE: traceFile,
          PIER_TEST_CRASH_AT: armFile,
          ...opts.env,
        },
      });
      const s = served;
      await Promise.race([
        healthy(base),
        s.exited.then((code) => {
          throw new Error(`pier serve exited (${code}) while starting:\n${s.output()}`);
        }),
      ]);
    },
    state: () => bedState(dataDir, store, opts.tables, served?.child.pid),
    async close() {
      await writeFile(armFile, '');
      await bed.serve().catch(() => {});
      if (alive(served?.child)) {
        served!.child.kill('SIGTERM');
        await served!.exited;
      }
      await removeLeftovers(dataDir);
      await store.end();
      await db.drop();
      await rm(dataDir, { recursive: true, force: true }).catch(() => {});
      await rm(traceFile, { force: true });
      await rm(armFile, { force: true });
      await rm(`${armFile}.reached`, { force: true });
    },
  };
  await bed.serve();
  const org = await request(base, 'POST', '/admin/v1/orgs', {
    token: OPERATOR,
    body: { name: 'crashes' },
  });
  if (org.status !== 201) throw new Error(`org create: ${org.status} ${JSON.stringify(org.body)}`);
  bed.token = org.body.token;
  bed.orgId = org.body.org.id;
  return bed;
}

/** What a round was, for the test's log (the file has a time budget). */
export interface RoundReport {
  points: string[];
  ms: number;
}

export interface CrashOptions {
  /** Operations frozen at their points per kill (each holds a job slot until the kill). */
  perRound?: number;
  /** How long any wait of a round may take. */
  deadlineMs?: number;
}

interface Armed<H> {
  op: CrashOperation<H>;
  point: string;
}

/**
 * Runs each operation cleanly, then once per crash point it passed, killed there. One
 * kill serves several operations: each armed line freezes one of them at its point, and
 * `pier serve` is killed once all are reached. Operations sharing a job kind are never
 * armed in one round, except instances of one operation: those pass the same points in
 * the same order, so each instance stops at the first armed point no other took.
 */
export async function crashAtEveryPoint(
  bed: CrashBed,
  ops: CrashOperation<any>[],
  opts: CrashOptions = {},
): Promise<RoundReport[]> {
  const inner = bed as CrashBed & {
    served(): Served | undefined;
    traceFile: string;
    armFile: string;
  };
  const perRound = opts.perRound ?? 8;
  const deadlineMs = opts.deadlineMs ?? 120_000;
  const reports: RoundReport[] = [];
  await bed.serve();
  // The bed at rest: no work of earlier operations (a first base backup) still running.
  await unfinishedJobsSettle(bed, undefined, deadlineMs);
  const before = await bed.state();
  const allKinds = [...new Set(ops.flatMap((o) => o.kinds))];

  // Clean runs, those of one kind one after the other (the trace names kinds, not runs).
  const points = new Map<CrashOperation<any>, string[]>();
  for (const wave of waves(ops)) {
    const t = Date.now();
    await writeFile(inner.traceFile, '');
    const handles = await Promise.all(wave.map((op) => op.start(bed)));
    await Promise.all(wave.map((op, i) => op.settle(bed, handles[i])));
    await unfinishedJobsSettle(bed, allKinds, deadlineMs);
    const traced = (await readFile(inner.traceFile, 'utf8')).split('\n').filter(Boolean);
    for (const op of wave) {
      const mine = traced.filter((p) => op.kinds.some((k) => p.startsWith(`${k}:`)));
      expect(mine.length, `${op.name} passed no crash point of ${op.kinds}`).toBeGreaterThan(0);
      points.set(op, [...new Set(mine)]);
    }
    await Promise.all(wave.map((op, i) => op.remove(bed, handles[i])));
    await expectSameState(bed, before, `clean runs of ${wave.map((o) => o.name)}`, deadlineMs);
    reports.push({ points: wave.map((o) => `${o.name}: clean`), ms: Date.now() - t });
  }

  for (;;) {
    const round = nextRound(ops, points, perRound);
    if (round.length === 0) break;
    const t = Date.now();
    const names = round.map((a) => `${a.op.name} at ${a.point}`);
    const where = `killed with ${names.join(', ')}`;
    await writeFile(inner.armFile, round.map((a) => a.point).join('\n'));
    await writeFile(`${inner.armFile}.reached`, '');
    const served = inner.served()!;
    const handles = await Promise.all(round.map((a) => a.op.start(bed)));
    const reached = async () =>
      (await readFile(`${inner.armFile}.reached`, 'utf8')).split('\n').filter(Boolean);
    await waitUntil(
      async () => (await reached()).length >= round.length,
      `every armed point to be reached (${names.join(', ')})`,
      deadlineMs,
    ).catch(async (err: Error) => {
      throw new Error(`${err.message}; reached: ${(await reached()).join(', ')}`);
    });
    served.child.kill('SIGKILL');
    await served.exited;
    await writeFile(inner.armFile, '');
    await bed.serve();
    await Promise.all(round.map((a, i) => a.op.settle(bed, handles[i])));
    await unfinishedJobsSettle(bed, allKinds, deadlineMs);
    await Promise.all(round.map((a, i) => a.op.remove(bed, handles[i])));
    await expectSameState(bed, before, where, deadlineMs);
    reports.push({ points: names, ms: Date.now() - t });
  }
  return reports;
}

/** Groups of operations with no job kind in common, in order. */
function waves(ops: CrashOperation<any>[]): CrashOperation<any>[][] {
  const out: CrashOperation<any>[][] = [];
  for (const op of ops) {
    const wave = out.find((w) => w.every((o) => !o.kinds.some((k) => op.kinds.includes(k))));
    if (wave) wave.push(op);
    else out.push([op]);
  }
  return out;
}

/** Takes the next round's armed points off `left`: at most `n`, no kind shared by two ops. */
function nextRound(
  ops: CrashOperation<any>[],
  left: Map<CrashOperation<any>, string[]>,
  n: number,
): Armed<unknown>[] {
  const round: Armed<unknown>[] = [];
  const kinds = new Set<string>();
  for (const op of ops) {
    const pending = left.get(op) ?? [];
    if (pending.length === 0 || op.kinds.some((k) => kinds.has(k))) continue;
    for (const k of op.kinds) kinds.add(k);
    const take = pending.splice(0, op.onePerRound ? 1 : n - round.length);
    for (const point of take) round.push({ op, point });
    if (round.length >= n) break;
  }
  return round;
}

/**
 * Waits until no job of `kinds` is queued to run now or running, and checks that those
 * that failed say why.
 */
async function unfinishedJobsSettle(
  bed: CrashBed,
  kinds: string[] | undefined,
  ms: number,
): Promise<void> {
  await waitUntil(
    async () => {
      const { rows } = await bed.store.query(
        `SELECT count(*)::int AS n FROM jobs WHERE ($1::text[] IS NULL OR kind = ANY($1))
          AND (state = 'running' OR (state = 'queued' AND run_at < now() + interval '1 minute'))`,
        [kinds ?? null],
      );
      return rows[0].n === 0;
    },
    `jobs of ${kinds ?? 'every kind'} to end`,
    ms,
  );
  const { rows } = await bed.store.query(
    `SELECT id, kind FROM jobs WHERE ($1::text[] IS NULL OR kind = ANY($1))
      AND state = 'failed' AND last_error IS NULL`,
    [kinds ?? null],
  );
  expect(rows, 'jobs failed without a reason').toEqual([]);
}

/**
 * The state must come back to `before`. Removal may finish a moment after its answer (a
 * backstop job, a server's exit), so it is looked at again for a while before the
 * difference is reported.
 */
async function expectSameState(
  bed: CrashBed,
  before: BedState,
  where: string,
  ms: number,
): Promise<void> {
  let now = await bed.state();
  const end = Date.now() + Math.min(ms, 20_000);
  while (JSON.stringify(now) !== JSON.stringify(before) && Date.now() < end) {
    await new Promise((r) => setTimeout(r, 200));
    now = await bed.state();
  }
  expect(now, `${where}: something was left behind`).toEqual(before);
}

async function bedState(
  dataDir: string,
  store: pg.Pool,
  tables: string[],
  servePid: number | undefined,
): Promise<BedState> {
  const processes = await processesUnder(dataDir, servePid);
  const mounts = (await readFile('/proc/self/mountinfo', 'utf8'))
    .split('\n')
    .map((l) => l.split(' ')[4] ?? '')
    // The pool's own mount comes with its first use, whichever operation that is.
    .filter((m) => m.startsWith(dataDir) && m !== path.join(dataDir, 'pool', 'mnt'))
    .sort();
  const rows: Record<string, number> = {};
  for (const t of tables) {
    rows[t] = (await store.query(`SELECT count(*)::int AS n FROM ${t}`)).rows[0].n;
  }
  return {
    processes,
    mounts,
    volumes: await poolVolumes(path.join(dataDir, 'pool')),
    rows,
  };
}

/** Top-level processes whose command line or working directory is under `dataDir`. */
async function processesUnder(dataDir: string, servePid: number | undefined): Promise<string[]> {
  // Top-level processes only: a server's own children (PostgreSQL's workers, whose titles
  // change as they work) live and die with it.
  const found = new Map<number, { ppid: number; line: string }>();
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === servePid) continue;
    const dir = path.join('/proc', entry);
    const argv = (await readFile(path.join(dir, 'cmdline'), 'utf8').catch(() => ''))
      .split('\0')
      .filter(Boolean);
    const cwd = await readlink(path.join(dir, 'cwd')).catch(() => '');
    if (!argv.some((a) => a.includes(dataDir)) && !cwd.startsWith(dataDir)) continue;
    const stat = await readFile(path.join(dir, 'stat'), 'utf8').catch(() => '');
    const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    found.set(Number(entry), { ppid, line: `${entry} ${argv.join(' ').slice(0, 300)}` });
  }
  const processes = [...found.values()].filter((p) => !found.has(p.ppid)).map((p) => p.line);
  return processes.sort();
}

/**
 * What a failed round left that pier no longer knows (an orphan is what the rounds look
 * for): the servers under this bed's own data dir are stopped and its mounts undone, so a
 * failure costs the host nothing.
 */
async function removeLeftovers(dataDir: string): Promise<void> {
  for (const line of (await processesUnder(dataDir, undefined)).reverse()) {
    try {
      process.kill(Number(line.split(' ')[0]), 'SIGKILL');
    } catch {
      // gone meanwhile
    }
  }
  await new Promise((r) => setTimeout(r, 500));
  const mounts = (await readFile('/proc/self/mountinfo', 'utf8'))
    .split('\n')
    .map((l) => l.split(' ')[4] ?? '')
    .filter((m) => m.startsWith(dataDir))
    .sort()
    .reverse();
  for (const m of mounts) await execFileP('umount', ['-l', m]).catch(() => {});
}

/** The pool keeps volumes in `mnt` (btrfs) or `volumes` (directories). */
async function poolVolumes(poolDir: string): Promise<string[]> {
  for (const sub of ['mnt', 'volumes']) {
    const names = await readdir(path.join(poolDir, sub)).catch(() => undefined);
    if (names) return names.sort();
  }
  return [];
}

export async function waitUntil<T>(
  fn: () => Promise<T | undefined | false>,
  what: string,
  ms: number,
): Promise<T> {
  const end = Date.now() + ms;
  let last: unknown;
  while (Date.now() < end) {
    try {
      const v = await fn();
      if (v !== undefined && v !== false) return v as T;
    } catch (err) {
      last = err;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out waiting for ${what}${last ? `: ${String(last)}` : ''}`);
}
