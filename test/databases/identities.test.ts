/**
 * Separate identities (issue 13, item 11): every managed database's servers run as a uid
 * of their own, never root and never the platform store's; one database's identity is
 * refused the files of another; a branch and a fork get identities of their own and own
 * all of their files; deleting a database removes its identity. Probes only read (a
 * child process with the identity's uid runs `cat`), so nothing on the host is written
 * even when a protection is missing.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { lstat, readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { lookupUser } from '../../src/host/server-identities.js';
import type { ServiceUser } from '../../src/host/service-user.js';
import { startTestPlatform, type TestOrg, type TestPlatform } from '../helpers/platform.js';
import {
  createDatabase,
  localDatabases,
  platformCa,
  query,
  settled,
  storagePool,
  waitFor,
} from './helpers.js';

const asRoot = process.getuid?.() === 0;

let tp: TestPlatform;
let org: TestOrg;
let ca: string;
let alphaUrl: string;
/** Database ids made here: their identities are removed in afterAll whatever happened. */
const made = new Set<string>();

interface DbHost {
  id: string;
  identity: ServiceUser;
  /** Path of the primary's volume, and of its archive's volume when it has one. */
  volume: string;
  archive?: string;
  pid: number;
}

const req = (method: string, p: string, body?: unknown) =>
  tp.request(method, p, { token: org.token, body });

/** What the host holds for database `name`: its identity, volume, archive and server pid. */
async function hostOf(name: string): Promise<DbHost> {
  const db = tp.platform.store.db;
  const { id } = await db
    .selectFrom('databases')
    .select('id')
    .where('org_id', '=', org.id)
    .where('name', '=', name)
    .executeTakeFirstOrThrow();
  made.add(id);
  const inst = await db
    .selectFrom('database_instances')
    .selectAll()
    .where('database_id', '=', id)
    .where('role', '=', 'primary')
    .executeTakeFirstOrThrow();
  const row = await db
    .selectFrom('databases')
    .select('archive_id')
    .where('id', '=', id)
    .executeTakeFirstOrThrow();
  const pool = await storagePool(tp);
  const volume = (await pool.info(inst.volume))!.path;
  const archive = row.archive_id ? (await pool.info(row.archive_id))?.path : undefined;
  const runtime = localDatabases(tp);
  const identity = await lookupUser(runtime.identities.nameOf(id));
  expect(identity, `the identity of ${name}`).toBeDefined();
  const pid = await waitFor(async () => runtime.get(id)?.primaryPid, `${name}'s server`);
  return { id, identity: identity!, volume, archive, pid };
}

/** Reads `file` as `who` (a child with its uid and gid): the exit status and stderr. */
function readAs(who: ServiceUser, file: string): { ok: boolean; stderr: string } {
  const r = spawnSync('cat', [file], { uid: who.uid, gid: who.gid, encoding: 'utf8' });
  return { ok: r.status === 0, stderr: r.stderr };
}

/** The real uid of process `pid`, from /proc/<pid>/status. */
async function uidOf(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  return Number(/^Uid:\s+(\d+)/m.exec(status)![1]);
}

/** Paths under `dir` (not following links) whose owner is not `uid`. */
async function foreignFiles(dir: string, uid: number): Promise<string[]> {
  const out: string[] = [];
  const walk = async (p: string) => {
    const st = await lstat(p);
    if (st.uid !== uid) out.push(p);
    if (st.isDirectory()) for (const e of await readdir(p)) await walk(path.join(p, e));
  };
  await walk(dir);
  return out;
}

/** Waits until a base backup of `name` is done (a fork needs one). */
async function baseBackupDone(name: string): Promise<void> {
  await waitFor(async () => {
    const r = await sql<{ n: number }>`SELECT count(*)::int AS n FROM jobs j
        JOIN databases d ON d.id = j.payload->>'databaseId'
        WHERE j.kind = 'databases.base-backup' AND j.state = 'done' AND d.name = ${name}`.execute(
      tp.platform.store.db,
    );
    return (r.rows[0]?.n ?? 0) >= 1;
  }, `a base backup of ${name}`);
}

beforeAll(async () => {
  tp = await startTestPlatform({ logLevel: (process.env.PIER_TEST_LOG as 'warn') ?? 'silent' });
  org = await tp.createOrg();
  ca = await platformCa(tp);
  alphaUrl = (await createDatabase(tp, org, { name: 'alpha', kind: 'postgres' })).url;
  await createDatabase(tp, org, { name: 'beta', kind: 'postgres' });
  await createDatabase(tp, org, { name: 'gamma', kind: 'redis', persistent: true });
}, 180_000);

afterAll(async () => {
  await tp?.close();
  // close() deletes every database, which removes identities; this is the backstop.
  for (const id of made)
    await localDatabases(tp)
      .identities.remove(id)
      .catch(() => undefined);
}, 180_000);

describe.skipIf(!asRoot)('separate identities', () => {
  it("runs each database's server as a uid of its own: not root, not the store's", async () => {
    const hosts = await Promise.all(['alpha', 'beta', 'gamma'].map(hostOf));
    const uids = new Set<number>();
    for (const h of hosts) {
      expect(await uidOf(h.pid)).toBe(h.identity.uid);
      expect(h.identity.uid).not.toBe(0);
      expect(h.identity.name).toMatch(/^pt[0-9a-z]+-[0-9a-f]{16}$/);
      uids.add(h.identity.uid);
    }
    expect(uids.size).toBe(3);
    // The platform store (embedded) runs as the service user: none of these.
    const service = await lookupUser(tp.platform.config.serviceUser);
    if (service) expect(uids.has(service.uid)).toBe(false);
  });

  it("refuses one database's identity the files of another, and gives it its own", async () => {
    const [a, b, g] = (await Promise.all(['alpha', 'beta', 'gamma'].map(hostOf))) as [
      DbHost,
      DbHost,
      DbHost,
    ];
    const bFiles = [
      path.join(b.volume, 'pgdata', 'PG_VERSION'),
      path.join(b.volume, 'pgdata', 'global', 'pg_control'),
      path.join(b.volume, 'pgdata', 'server.key'),
    ];
    for (const file of bFiles) {
      expect(readAs(b.identity, file).ok, `${file} as its own identity`).toBe(true);
      const probe = readAs(a.identity, file);
      expect(probe.ok, `${file} as another database's identity`).toBe(false);
      expect(probe.stderr).toMatch(/Permission denied/);
    }
    // Its socket directory (in the volume unless the path is too deep) is its own, 0700.
    const socketDir = path.join(b.volume, 'run');
    if (existsSync(socketDir)) {
      expect((await lstat(socketDir)).uid).toBe(b.identity.uid);
      expect((await lstat(socketDir)).mode & 0o777).toBe(0o700);
    }
    // Its archive (WAL and base backups) is its own too.
    expect(b.archive).toBeDefined();
    const st = await lstat(b.archive!);
    expect(st.uid).toBe(b.identity.uid);
    expect(st.mode & 0o777).toBe(0o700);
    expect(readAs(a.identity, path.join(b.archive!, 'wal')).ok).toBe(false);
    // Redis's data directory likewise.
    const redisData = path.join(g.volume, 'data');
    expect((await lstat(redisData)).uid).toBe(g.identity.uid);
    expect(((await lstat(redisData)).mode & 0o777).toString(8)).toBe('700');
    const aof = await readdir(path.join(redisData, 'appendonlydir'));
    const aofFile = path.join(redisData, 'appendonlydir', aof[0]!);
    expect(readAs(g.identity, aofFile).ok).toBe(true);
    expect(readAs(a.identity, aofFile).ok).toBe(false);
    expect(readAs(g.identity, path.join(a.volume, 'pgdata', 'PG_VERSION')).ok).toBe(false);
  });

  it('gives a branch and a fork identities of their own, owning all their files', async () => {
    const a = await hostOf('alpha');
    await query(alphaUrl, ca, 'CREATE TABLE t (id int)');
    await query(alphaUrl, ca, 'INSERT INTO t VALUES (1)');
    expect((await req('POST', '/v1/resources/alpha/branch', { name: 'alpha-br' })).status).toBe(
      202,
    );
    await baseBackupDone('alpha');
    expect((await req('POST', '/v1/resources/alpha/fork', { name: 'alpha-fk' })).status).toBe(202);
    for (const name of ['alpha-br', 'alpha-fk']) {
      const done = await settled(tp, org, name);
      expect(done.state, done.stateReason).toBe('ready');
      const copy = await hostOf(name);
      expect(copy.identity.uid).not.toBe(a.identity.uid);
      expect(await uidOf(copy.pid)).toBe(copy.identity.uid);
      expect(await foreignFiles(copy.volume, copy.identity.uid)).toEqual([]);
      // The copy works, and cannot read its source's files (nor the source its).
      const copyUrl = (await req('POST', `/v1/resources/${name}/url`)).body.url as string;
      expect(await query(copyUrl, ca, 'SELECT id FROM t')).toEqual([{ id: 1 }]);
      expect(readAs(copy.identity, path.join(a.volume, 'pgdata', 'PG_VERSION')).ok).toBe(false);
      expect(readAs(a.identity, path.join(copy.volume, 'pgdata', 'PG_VERSION')).ok).toBe(false);
    }
    // The fork's scratch copy of the WAL it replayed is gone.
    const fork = await hostOf('alpha-fk');
    const volumes = await (await storagePool(tp)).list();
    expect(volumes.filter((v) => v.endsWith('-replay'))).toEqual([]);
    expect(fork.archive).toBeDefined();
    expect((await lstat(fork.archive!)).uid).toBe(fork.identity.uid);
  }, 180_000);

  it('removes the identity of a deleted database', async () => {
    const b = await hostOf('beta');
    expect((await req('DELETE', '/v1/resources/beta')).status).toBe(204);
    expect(await lookupUser(b.identity.name)).toBeUndefined();
  });
});
