/**
 * `pier serve` as people run it: a real process from the sources (through tsx), in any
 * working directory, with its output collected for the test's messages.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
/** tsx's loader and the CLI by absolute paths: the working directory may be anywhere. */
const tsx = pathToFileURL(path.join(repo, 'node_modules/tsx/dist/loader.mjs')).href;
const entry = path.join(repo, 'src/cli/entry.ts');

export interface Served {
  child: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
}

export async function freePort(): Promise<number> {
  const srv = net.createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const port = (srv.address() as net.AddressInfo).port;
  await new Promise((r) => srv.close(r));
  return port;
}

/** Runs `pier serve args…` in `cwd` (default: this process's) with `env` added. */
export function startServe(
  args: string[],
  opts: { cwd?: string; env?: Record<string, string> } = {},
): Served {
  const child = spawn(process.execPath, ['--import', tsx, entry, 'serve', ...args], {
    cwd: opts.cwd,
    // Any free services port: test files (and other pier processes) run side by side.
    env: { ...process.env, PIER_SERVICES_PORT: '0', PIER_SSH_LISTEN: '127.0.0.1:0', ...opts.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
  return { child, output: () => out, exited };
}

/** Waits until `base`/healthz answers 200. */
export async function healthy(base: string, ms = 60_000): Promise<void> {
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
