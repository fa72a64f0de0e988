import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from '../helpers/platform.js';

// `pier serve` as people run it: a real process, the embedded store in its data dir.
interface Served {
  child: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
}

async function freePort(): Promise<number> {
  const srv = net.createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const port = (srv.address() as net.AddressInfo).port;
  await new Promise((r) => srv.close(r));
  return port;
}

function serve(dataDir: string, port: number, extraEnv: Record<string, string> = {}): Served {
  const child = spawn(
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
      // Any free services port: test files (and other pier processes) run side by side.
      env: { ...process.env, PIER_SERVICES_PORT: '0', ...extraEnv },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
  return { child, output: () => out, exited };
}

async function healthy(base: string, ms = 60_000): Promise<void> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    try {
      if ((await fetch(`${base}/healthz`)).ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('pier serve did not become healthy');
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
