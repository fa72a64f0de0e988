/**
 * `pier serve` killed with SIGKILL in the middle of a branch and a fork, then started
 * again: each copy ends `ready` (or `failed` with a reason), never stuck `restoring`, and
 * no orphan server or volume is left. A real `pier serve` process, real databases.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/database.js';
import { request, testIdentityPrefix } from '../helpers/platform.js';
import { freeLoopbackPort } from '../../src/host/ports.js';
import { postmastersOf, sleep, waitFor } from './helpers.js';

let db: TestDatabase;
let dataDir: string;
let port: number;
let base: string;
let child: ChildProcess | undefined;
let token: string;
const operator = 'operator-token-for-the-crash-test';

function serve(): ChildProcess {
  const c = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      'src/cli/entry.ts',
      'serve',
      '--listen',
      `127.0.0.1:${port}`,
      '--data-dir',
      dataDir,
    ],
    {
      env: {
        ...process.env,
        PIER_DATABASE_URL: db.url,
        PIER_OPERATOR_TOKEN: operator,
        PIER_JOB_LEASE_MS: '1500',
        PIER_LOG_LEVEL: 'warn',
        // Any free port for the services listener: other piers run beside this one.
        PIER_SERVICES_PORT: '0',
        PIER_SSH_LISTEN: '127.0.0.1:0',
        // Its database identities are this run's, removed at the run's end.
        PIER_DATABASE_USER_PREFIX: testIdentityPrefix(),
      },
      stdio: ['ignore', 'ignore', 'inherit'],
    },
  );
  return c;
}

async function healthy(): Promise<void> {
  await waitFor(
    async () => (await fetch(`${base}/healthz`)).ok,
    'pier serve to be healthy',
    60_000,
  );
}

const api = (method: string, p: string, body?: unknown) =>
  request(base, method, p, { token, body });

beforeAll(async () => {
  db = await createTestDatabase();
  dataDir = await mkdtemp(path.join(os.tmpdir(), 'pier-crash-'));
  port = await freeLoopbackPort();
  base = `http://127.0.0.1:${port}`;
  child = serve();
  await healthy();
  const org = await request(base, 'POST', '/admin/v1/orgs', {
    token: operator,
    body: { name: 'crash' },
  });
  token = org.body.token;
}, 90_000);

afterAll(async () => {
  // A test that failed after its SIGKILL leaves no pier running (a killed child has a
  // signalCode, not an exitCode): start one again, so that it takes the databases back and
  // deletes them, and its exit unmounts the pool. Otherwise servers and a mount stay behind.
  const alive = (c?: ChildProcess) => !!c && c.exitCode === null && c.signalCode === null;
  if (!alive(child) && token) {
    child = serve();
    await healthy().catch(() => {});
  }
  if (alive(child)) {
    for (const d of (await api('GET', '/v1/resources')).body ?? []) {
      await api('DELETE', `/v1/resources/${d.name}`);
    }
    child!.kill('SIGTERM');
    await new Promise((r) => child!.once('exit', r));
  }
  await db.drop();
  await rm(dataDir, { recursive: true, force: true }).catch(() => {});
}, 120_000);

describe('a crash during long work', () => {
  it('ends every copy ready or failed, with nothing orphaned', async () => {
    const made = await api('POST', '/v1/resources', { name: 'crashy', kind: 'postgres' });
    expect(made.status).toBe(201);
    // Give the archive its first base backup, so a fork has something to read.
    await sleep(1500);
    const branch = await api('POST', '/v1/resources/crashy/branch', { name: 'crashy-b' });
    const fork = await api('POST', '/v1/resources/crashy/fork', { name: 'crashy-f' });
    expect(branch.status).toBe(202);
    expect(fork.status).toBe(202);
    child!.kill('SIGKILL');
    await new Promise((r) => child!.once('exit', r));

    child = serve();
    await healthy();
    for (const name of ['crashy-b', 'crashy-f']) {
      const end = await waitFor(
        async () => {
          const r = await api('GET', `/v1/resources/${name}`);
          return r.body.state !== 'restoring' ? r.body : undefined;
        },
        `${name} to settle`,
        90_000,
      );
      if (end.state === 'failed') expect(end.stateReason).toBeTruthy();
      else expect(end.state).toBe('ready');
    }

    // Every volume in the pool belongs to a database, a template or an archive.
    const list = (await api('GET', '/v1/resources')).body as { name: string }[];
    expect(list.map((d) => d.name).sort()).toEqual(['crashy', 'crashy-b', 'crashy-f']);
    const volumesDir = await findVolumesDir(path.join(dataDir, 'pool'));
    const servers = (await readdir(volumesDir)).filter((v) => /^(pg|rd)-/.test(v));
    expect(servers.length).toBe(3);
    for (const v of servers) {
      expect((await postmastersOf(path.join(volumesDir, v))).length).toBe(1);
    }
    // As long as its own waits: a cold template, a restart and a fork's replay on a busy
    // 2-core host took 36 s, past the default 30 s.
  }, 150_000);
});

/** The pool keeps volumes in `mnt` (btrfs) or `volumes` (directories). */
async function findVolumesDir(poolDir: string): Promise<string> {
  for (const sub of ['mnt', 'volumes']) {
    const dir = path.join(poolDir, sub);
    if ((await readdir(dir).catch(() => undefined)) !== undefined) return dir;
  }
  throw new Error(`no volumes directory in ${poolDir}`);
}
