/**
 * The pier side of the database benchmarks: a real pier (`lib/platform.ts`) with an
 * organization and the platform CA, real clients over TLS that verify it (as
 * `test/databases/helpers.ts` connects), waiting for copies, and cleaning up. Databases
 * outlive `pier serve` by design, so `close()` deletes every database of the organization
 * before the platform closes (its storage pool cannot be unmounted while servers run).
 */
import { execFile } from 'node:child_process';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import {
  call,
  createBenchOrg,
  startBenchPlatform,
  type BenchOrg,
  type BenchPlatform,
} from './platform.js';
import { Stopwatch } from './db-samples.js';

export interface DbBench {
  pier: BenchPlatform;
  org: BenchOrg;
  /** The platform CA (PEM), as an operator fetches it from GET /admin/v1/ca. */
  ca: string;
  api(method: string, route: string, body?: unknown, expect?: number): Promise<any>;
  close(): Promise<void>;
}

/** A pier, an organization, and the CA to verify its databases with. */
export async function openDbBench(): Promise<DbBench> {
  const pier = await startBenchPlatform();
  try {
    const org = await createBenchOrg(pier);
    const res = await fetch(`${pier.url}/admin/v1/ca`, {
      headers: { authorization: `Bearer ${pier.operatorToken}` },
    });
    if (res.status !== 200) throw new Error(`GET /admin/v1/ca answered ${res.status}`);
    const ca = await res.text();
    const api = (method: string, route: string, body?: unknown, expect = 200) =>
      call(pier.url, org.token, method, route, body, expect) as Promise<any>;
    return {
      pier,
      org,
      ca,
      api,
      async close() {
        let failure: unknown;
        try {
          const list = (await api('GET', '/v1/resources')) as { name: string }[];
          for (const d of list) {
            await api('DELETE', `/v1/resources/${d.name}`, undefined, 204).catch(
              (err: unknown) => (failure ??= err),
            );
          }
        } catch (err) {
          failure ??= err;
        }
        await pier.close().catch((err: unknown) => (failure ??= err));
        if (failure !== undefined) throw failure;
      },
    };
  } catch (err) {
    await pier.close().catch(() => {});
    throw err;
  }
}

/**
 * A pg client from a handed-out URL that verifies the server certificate against the CA
 * (`sslmode=verify-full` semantics), as the database tests connect.
 */
export function pierClient(url: string, ca: string): pg.Client {
  const u = new URL(url);
  return new pg.Client({
    host: u.hostname,
    port: Number(u.port),
    user: decodeURIComponent(u.username),
    password: decodeURIComponent(u.password),
    database: u.pathname.slice(1),
    ssl: { ca, servername: 'localhost' },
    connectionTimeoutMillis: 30_000,
  });
}

/** Runs `text` on a fresh connection and closes it. */
export async function pierQuery<T extends pg.QueryResultRow = Record<string, unknown>>(
  url: string,
  ca: string,
  text: string,
  values: unknown[] = [],
): Promise<T[]> {
  const c = pierClient(url, ca);
  await c.connect();
  try {
    return (await c.query<T>(text, values)).rows;
  } finally {
    await c.end();
  }
}

/**
 * A new connection and `SELECT 1` on it, timed on `watch` as `connect` (TCP, TLS handshake,
 * SCRAM, session start) and `SELECT 1`; the connection is closed after the last step.
 */
export async function timedFirstQuery(client: pg.Client, watch: Stopwatch): Promise<void> {
  try {
    await client.connect();
    watch.step('connect');
    const { rows } = await client.query<{ one: number }>('SELECT 1 AS one');
    watch.step('SELECT 1');
    if (rows[0]?.one !== 1) throw new Error(`SELECT 1 answered ${JSON.stringify(rows)}`);
  } finally {
    await client.end().catch(() => {});
  }
}

/**
 * Polls GET /v1/resources/:name every `everyMs` until the database leaves `restoring`;
 * throws unless it became `ready`.
 */
export async function waitReady(b: DbBench, name: string, everyMs = 10, timeoutMs = 300_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const r = await b.api('GET', `/v1/resources/${name}`);
    if (r.state === 'ready') return r;
    if (r.state !== 'restoring') {
      throw new Error(`${name} ended ${r.state}: ${r.stateReason ?? 'no reason given'}`);
    }
    if (Date.now() > deadline) throw new Error(`${name} was not ready in time`);
    await sleep(everyMs);
  }
}

/**
 * A copy made by `POST /v1/resources/:source/<kind>` and its first query, timed in parts:
 * the 202, the wait for `ready`, the one-time URL, the connection and `SELECT 1`.
 */
export async function timedCopy(
  b: DbBench,
  source: string,
  kind: 'branch' | 'fork',
  body: { name: string; [k: string]: unknown },
): Promise<{ watch: Stopwatch; url: string }> {
  const watch = new Stopwatch();
  await b.api('POST', `/v1/resources/${source}/${kind}`, body, 202);
  watch.step('202');
  await waitReady(b, body.name);
  watch.step('ready');
  const { url } = (await b.api('POST', `/v1/resources/${body.name}/url`)) as { url: string };
  watch.step('url');
  await timedFirstQuery(pierClient(url, b.ca), watch);
  return { watch, url };
}

export async function deleteDatabase(b: DbBench, name: string): Promise<void> {
  await b.api('DELETE', `/v1/resources/${name}`, undefined, 204);
}

/** The directory holding the storage pool's volumes (btrfs image or plain directories). */
export async function poolRoot(dataDir: string): Promise<{ kind: string; root: string }> {
  const dir = path.join(dataDir, 'pool');
  const kind = (await readFile(path.join(dir, 'pool.kind'), 'utf8').catch(() => '')).trim();
  if (kind === 'btrfs') {
    const image = await readdir(path.join(dir, 'mnt')).then(
      () => true,
      () => false,
    );
    return { kind, root: path.join(dir, image ? 'mnt' : 'volumes') };
  }
  return { kind: kind || 'unknown', root: path.join(dir, 'volumes') };
}

/** Names of the volumes in the pool now. */
export async function volumes(dataDir: string): Promise<string[]> {
  const { root } = await poolRoot(dataDir);
  return (await readdir(root).catch(() => [] as string[])).filter((n) => !n.startsWith('.'));
}

/** Pids of the processes named `names` (argv[0]'s base name) whose arguments mention `needle`. */
async function toolsMentioning(names: string[], needle: string): Promise<number[]> {
  const out: number[] = [];
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const argv = (await readFile(`/proc/${entry}/cmdline`, 'utf8').catch(() => ''))
      .split('\0')
      .filter(Boolean);
    if (!names.includes(path.basename(argv[0] ?? ''))) continue;
    if (argv.some((a) => a.includes(needle))) out.push(Number(entry));
  }
  return out;
}

/**
 * Waits until pier's background work on this data dir is over (base backups, copies,
 * syncs), seen three times in a row 100 ms apart, so that the next sample does not share
 * the two cores with it. Answers how long it waited.
 */
export async function quiesce(dataDir: string, timeoutMs = 180_000): Promise<number> {
  const started = Date.now();
  let quiet = 0;
  while (quiet < 3) {
    const busy = await toolsMentioning(['pg_basebackup', 'cp', 'initdb', 'pg_dump'], dataDir);
    quiet = busy.length === 0 ? quiet + 1 : 0;
    if (Date.now() - started > timeoutMs) throw new Error('pier stayed busy for too long');
    await sleep(100);
  }
  return Date.now() - started;
}

/**
 * Puts the disk at rest before a sample, on either side: waits until btrfs has cleaned up
 * the subvolumes of deleted databases (`btrfs subvolume sync`, a btrfs pool only), then
 * writes back every dirty page (`sync`). Neither side then pays for the other's leftovers.
 */
export async function settleDisk(dataDir: string): Promise<void> {
  const { kind, root } = await poolRoot(dataDir);
  if (kind === 'btrfs') await run('btrfs', ['subvolume', 'sync', root]);
  await run('sync', []);
}

function run(file: string, args: string[]): Promise<void> {
  return new Promise((resolve, reject) =>
    execFile(file, args, { timeout: 300_000 }, (err) => (err ? reject(err) : resolve())),
  );
}

/**
 * Waits until the server behind `url` has archived every finished WAL segment (as the
 * customer sees it in pg_stat_archiver), so that no archiving runs during a measurement.
 */
export async function archiveCaughtUp(url: string, ca: string, timeoutMs = 300_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const [r] = await pierQuery<{
      current: string;
      archived: string | null;
      failed: string | null;
    }>(
      url,
      ca,
      `SELECT pg_walfile_name(pg_current_wal_lsn()) AS current,
              last_archived_wal AS archived, last_failed_wal AS failed FROM pg_stat_archiver`,
    );
    // Segment names sort in WAL order; the current one is still being written.
    if (r && r.archived !== null && segmentAfter(r.archived) >= r.current) return;
    if (Date.now() > deadline) {
      throw new Error(`archiving did not catch up: ${JSON.stringify(r)}`);
    }
    await sleep(250);
  }
}

/** The name of the WAL segment after `name` (16 MB segments, same timeline). */
function segmentAfter(name: string): string {
  const tli = name.slice(0, 8);
  const log = parseInt(name.slice(8, 16), 16);
  const seg = parseInt(name.slice(16, 24), 16);
  const [nl, ns] = seg === 0xff ? [log + 1, 0] : [log, seg + 1];
  const hex = (n: number) => n.toString(16).toUpperCase().padStart(8, '0');
  return `${tli}${hex(nl)}${hex(ns)}`;
}

/**
 * When the server of `volume` was last started and when it said it was ready, from the
 * timestamps of its log (ms precision, UTC).
 */
export async function serverSpan(
  dataDir: string,
  volume: string,
): Promise<{ startedAt: number; readyAt: number } | undefined> {
  const { root } = await poolRoot(dataDir);
  const log = await readFile(path.join(root, volume, 'postgres.log'), 'utf8').catch(() => '');
  const at = (line: string) => Date.parse(`${line.slice(0, 23).replace(' ', 'T')}Z`);
  const lines = log.split('\n');
  let startedAt: number | undefined;
  let readyAt: number | undefined;
  for (const line of lines) {
    if (line.includes('LOG:  starting PostgreSQL')) [startedAt, readyAt] = [at(line), undefined];
    else if (line.includes('ready to accept connections') && startedAt !== undefined) {
      readyAt ??= at(line);
    }
  }
  return startedAt !== undefined && readyAt !== undefined ? { startedAt, readyAt } : undefined;
}

/**
 * Where a pier operation's time went, around its server's start: from the request to the
 * server's start, the start itself (recovery, replay, promotion) as its log tells, and
 * from the server's readiness until pier answered (or showed `ready`).
 */
export function aroundServer(
  requestAt: number,
  answeredAt: number,
  span: { startedAt: number; readyAt: number } | undefined,
): Record<string, number> | undefined {
  if (!span) return undefined;
  return {
    beforeServer: span.startedAt - requestAt,
    server: span.readyAt - span.startedAt,
    afterServer: answeredAt - span.readyAt,
  };
}

/** The parts of `aroundServer` in words, `until` naming what ended the operation. */
export function describeAround(w: Record<string, number> | undefined, until: string): string {
  if (!w) return 'no server log';
  const ms = (n: number) => `${n < 100 ? n.toFixed(1) : Math.round(n).toString()} ms`;
  return (
    `before the server's start ${ms(w.beforeServer!)}, its start ${ms(w.server!)}, ` +
    `then until ${until} ${ms(w.afterServer!)}`
  );
}

/** How much WAL a server replayed at its start, and how long that took, from its log. */
export interface Redo {
  /** WAL replayed, in MB (10^6 bytes). */
  mb: number;
  /** The replay's elapsed time as PostgreSQL reports it, in ms. */
  ms: number;
}

/** The redo of the last start of the server in `volume`, if its log reports one. */
export async function redoOf(dataDir: string, volume: string): Promise<Redo | undefined> {
  const { root } = await poolRoot(dataDir);
  const log = await readFile(path.join(root, volume, 'postgres.log'), 'utf8').catch(() => '');
  const starts = [...log.matchAll(/redo starts at ([0-9A-F]+\/[0-9A-F]+)/g)].pop();
  const done = [
    ...log.matchAll(/redo done at ([0-9A-F]+\/[0-9A-F]+).*?elapsed: ([\d.]+) s/g),
  ].pop();
  if (!starts || !done) return undefined;
  return {
    mb: (lsn(done[1]!) - lsn(starts[1]!)) / 1e6,
    ms: Number(done[2]) * 1000,
  };
}

function lsn(text: string): number {
  const [hi, lo] = text.split('/');
  return parseInt(hi!, 16) * 2 ** 32 + parseInt(lo!, 16);
}
