/**
 * First run from a home directory (issue 13, item 13): `npx pier serve` as root from a
 * clone inside a directory that other users cannot enter (as /root is, mode 0700), with
 * every default: the data dir is `./.pier` and the store is embedded. The servers pier
 * runs as other users (the store, the databases) cannot reach anything under that home,
 * so their files must live where they can; creating a database and querying it proves it.
 */
import { existsSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, readdir, readFile, rm, rmdir } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { outsideServerDir, SERVER_DIRS_ROOT } from '../../src/host/server-dir.js';
import { query } from '../databases/helpers.js';
import { request, testIdentityPrefix } from '../helpers/platform.js';
import { freePort, healthy, startServe, type Served } from '../helpers/serve.js';

const asRoot = process.getuid?.() === 0;

let home: string;
let clone: string;
let base: string;
let served: Served | undefined;
let orgToken: string | undefined;

/** Stops every PostgreSQL server whose data lives under `dir` (after a failed run). */
async function stopServersUnder(dir: string): Promise<void> {
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const argv = await readFile(`/proc/${entry}/cmdline`, 'utf8').catch(() => '');
    if (argv.includes(dir)) process.kill(Number(entry), 'SIGKILL');
  }
}

beforeAll(async () => {
  if (!asRoot) return;
  home = await mkdtemp(path.join(os.tmpdir(), 'pier-home-'));
  await chmod(home, 0o700);
  clone = path.join(home, 'pier');
  await mkdir(clone);
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  served = startServe(['--listen', `127.0.0.1:${port}`], {
    cwd: clone,
    env: {
      // Every default that matters here: no data dir, no external store.
      PIER_DATA_DIR: '',
      PIER_DATABASE_URL: '',
      PIER_SERVER_DIR: '',
      PIER_STORAGE_POOL: 'directory',
      PIER_DATABASE_USER_PREFIX: testIdentityPrefix(),
      PIER_LOG_LEVEL: 'warn',
    },
  });
  await Promise.race([
    healthy(base, 120_000),
    served.exited.then((code) => {
      throw new Error(`pier serve exited (${code}): ${served!.output()}`);
    }),
  ]);
}, 150_000);

afterAll(async () => {
  if (!asRoot) return;
  const serverDir = outsideServerDir(path.join(clone, '.pier'));
  if (orgToken) await request(base, 'DELETE', '/v1/resources/home', { token: orgToken });
  if (served && served.child.exitCode === null && served.child.signalCode === null) {
    served.child.kill('SIGTERM');
    const timer = setTimeout(() => served!.child.kill('SIGKILL'), 30_000);
    await served.exited;
    clearTimeout(timer);
  }
  // Whatever a failure left running (the store, a database) goes before its files.
  await stopServersUnder(serverDir);
  await rm(serverDir, { recursive: true, force: true });
  await rmdir(SERVER_DIRS_ROOT).catch(() => undefined); // only when nothing else is in it
  await rm(home, { recursive: true, force: true });
}, 90_000);

describe.skipIf(!asRoot)('pier serve from a clone in a closed home directory', () => {
  it('starts with the defaults and serves a database', async () => {
    const dataDir = path.join(clone, '.pier');
    const token = (await readFile(path.join(dataDir, 'operator-token'), 'utf8')).trim();
    const org = await request(base, 'POST', '/admin/v1/orgs', { token, body: { name: 'home' } });
    expect(org.status, JSON.stringify(org.body)).toBe(201);
    orgToken = org.body.token as string;
    const db = await request(base, 'POST', '/v1/resources', {
      token: orgToken,
      body: { name: 'home', kind: 'postgres' },
    });
    expect(db.status, `${JSON.stringify(db.body)}\n${served!.output()}`).toBe(201);
    const ca = await (
      await fetch(`${base}/admin/v1/ca`, { headers: { authorization: `Bearer ${token}` } })
    ).text();
    await query(db.body.url as string, ca, 'CREATE TABLE t (v text)');
    await query(db.body.url as string, ca, "INSERT INTO t VALUES ('home')");
    expect(await query(db.body.url as string, ca, 'SELECT v FROM t')).toEqual([{ v: 'home' }]);
    // pier's own files stay in the data dir; the servers' live where they can reach them.
    expect(existsSync(path.join(dataDir, 'operator-token'))).toBe(true);
    expect(existsSync(path.join(dataDir, 'store'))).toBe(false);
    expect(existsSync(path.join(outsideServerDir(dataDir), 'store', 'pgdata'))).toBe(true);
  });
});
