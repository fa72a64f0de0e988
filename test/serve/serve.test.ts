import { existsSync } from 'node:fs';
import { chmod, mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { request } from '../helpers/platform.js';
import { freePort, healthy, startServe, type Served } from '../helpers/serve.js';

// `pier serve` as people run it: a real process, the embedded store in its data dir.
// A directory pool: these servers are killed with SIGKILL, which would leave a btrfs mount.
function serve(dataDir: string, port: number, extraEnv: Record<string, string> = {}): Served {
  return startServe(['--listen', `127.0.0.1:${port}`, '--data-dir', dataDir], {
    env: { PIER_STORAGE_POOL: 'directory', ...extraEnv },
  });
}

let root: string;
let dataDir: string;
let port: number;
let base: string;
let first: Served;

beforeAll(async () => {
  root = await mkdtemp(path.join(os.tmpdir(), 'pier-serve-'));
  await chmod(root, 0o711);
  dataDir = path.join(root, 'data');
  port = await freePort();
  base = `http://127.0.0.1:${port}`;
  first = serve(dataDir, port);
  await healthy(base);
}, 90_000);

afterAll(async () => {
  first?.child.kill('SIGKILL');
  await rm(root, { recursive: true, force: true });
});

describe('pier serve', () => {
  it('writes the operator token with mode 0600 and answers the operator API', async () => {
    const file = path.join(dataDir, 'operator-token');
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    expect((await stat(path.join(dataDir, 'master.key'))).mode & 0o777).toBe(0o600);
    const token = (await readFile(file, 'utf8')).trim();
    const res = await request(base, 'POST', '/admin/v1/orgs', { token, body: { name: 'kept' } });
    expect(res.status).toBe(201);
  });

  it('opens the storage pool once started, before anything needs it', async () => {
    await vi.waitFor(() => expect(first.output()).toContain('storage pool open'), {
      timeout: 30_000,
      interval: 100,
    });
    expect(existsSync(path.join(dataDir, 'pool'))).toBe(true);
  });

  it('refuses a second server on the same data dir with a clear message', async () => {
    const second = serve(dataDir, await freePort());
    const code = await second.exited;
    expect(code).not.toBe(0);
    expect(second.output()).toContain('already using the data dir');
  });

  it('stops on SIGTERM with exit 0, stops its store, and takes it back on the next start', async () => {
    const token = (await readFile(path.join(dataDir, 'operator-token'), 'utf8')).trim();
    first.child.kill('SIGTERM');
    expect(await first.exited).toBe(0);
    expect(existsSync(path.join(dataDir, 'store', 'pgdata', 'postmaster.pid'))).toBe(false);
    expect(existsSync(path.join(dataDir, 'serve.lock'))).toBe(false);

    first = serve(dataDir, port);
    await healthy(base);
    const orgs = await request(base, 'GET', '/admin/v1/orgs', { token });
    expect(orgs.body.map((o: { name: string }) => o.name)).toContain('kept');
    expect(first.output()).toContain('"reused":false');
  }, 90_000);

  it('takes back a store left running by a crashed server', async () => {
    first.child.kill('SIGKILL');
    await first.exited;
    // The crash left the lock file and a running PostgreSQL behind.
    expect(existsSync(path.join(dataDir, 'store', 'pgdata', 'postmaster.pid'))).toBe(true);
    first = serve(dataDir, port);
    await healthy(base);
    expect(first.output()).toContain('"reused":true');
    first.child.kill('SIGTERM');
    expect(await first.exited).toBe(0);
  }, 90_000);
});
