/**
 * What the database tests share: real clients over TLS that verify the platform CA,
 * waiting for a copy to become ready, and looking at the host (processes, volumes, ports)
 * to prove that nothing is left behind.
 */
import { readdir, readFile } from 'node:fs/promises';
import type { IncomingMessage } from 'node:http';
import net from 'node:net';
import path from 'node:path';
import pg from 'pg';
import { expect } from 'vitest';
import WebSocket from 'ws';
import type { LocalDatabaseRuntime } from '../../src/engines/local/database-runtime.js';
import type { StoragePool } from '../../src/storage/pool/pool.js';
import type { TestOrg, TestPlatform } from '../helpers/platform.js';

/** The platform CA, as an operator fetches it. */
export async function platformCa(tp: TestPlatform): Promise<string> {
  const res = await fetch(`${tp.url}/admin/v1/ca`, {
    headers: { authorization: `Bearer ${tp.operatorToken}` },
  });
  expect(res.status).toBe(200);
  return res.text();
}

/**
 * A pg client from a handed-out URL, verifying the server certificate against the CA
 * (`sslmode=verify-full` semantics): the URL's parts, with the CA added.
 */
export function pgClient(url: string, ca: string): pg.Client {
  const u = new URL(url);
  expect(u.searchParams.get('sslmode')).toBe('require');
  return new pg.Client({
    host: u.hostname,
    port: Number(u.port),
    user: decodeURIComponent(u.username),
    password: decodeURIComponent(u.password),
    database: u.pathname.slice(1),
    ssl: { ca, servername: 'localhost' },
    connectionTimeoutMillis: 20_000,
  });
}

/** Runs `text` on a fresh connection and closes it. */
export async function query<T extends pg.QueryResultRow = Record<string, unknown>>(
  url: string,
  ca: string,
  text: string,
  values: unknown[] = [],
): Promise<T[]> {
  const c = pgClient(url, ca);
  // A server that dies mid-query (a full disk) also emits 'error' on the client; the
  // query's own rejection reports it, so the event must not become an uncaught exception.
  c.on('error', () => undefined);
  await c.connect();
  try {
    return (await c.query<T>(text, values)).rows;
  } finally {
    await c.end().catch(() => undefined);
  }
}

export async function sleep(ms: number): Promise<void> {
  await new Promise((r) => setTimeout(r, ms));
}

/** Polls `fn` until it returns a truthy value. */
export async function waitFor<T>(
  fn: () => Promise<T>,
  what: string,
  ms = 60_000,
): Promise<NonNullable<T>> {
  const end = Date.now() + ms;
  let last: unknown;
  for (;;) {
    try {
      last = await fn();
      if (last) return last as NonNullable<T>;
    } catch (err) {
      last = err;
    }
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}; last: ${String(last)}`);
    await sleep(100);
  }
}

/** A raw tunnel WebSocket: the open socket, or the refusal's status and body. */
export async function openDatabaseTunnel(
  tp: TestPlatform,
  name: string,
  token: string,
): Promise<{ ws?: WebSocket; status?: number; body?: any }> {
  const url = `${tp.url.replace(/^http/, 'ws')}/v1/resources/${name}/tunnel`;
  const ws = new WebSocket(url, { headers: { authorization: `Bearer ${token}` } });
  return new Promise((resolve, reject) => {
    ws.once('open', () => resolve({ ws }));
    ws.once('error', reject);
    ws.once('unexpected-response', (_req, res: IncomingMessage) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        resolve({ status: res.statusCode, body: JSON.parse(Buffer.concat(chunks).toString()) });
        ws.terminate();
      });
    });
  });
}

/** Waits until the database leaves `restoring`, and returns its record. */
export async function settled(tp: TestPlatform, org: TestOrg, name: string, ms = 90_000) {
  return waitFor(
    async () => {
      const res = await tp.request('GET', `/v1/resources/${name}`, { token: org.token });
      return res.status === 200 && res.body.state !== 'restoring' ? res.body : undefined;
    },
    `${name} to settle`,
    ms,
  );
}

/** Creates a database and returns the 201 body (with its URL). */
export async function createDatabase(
  tp: TestPlatform,
  org: TestOrg,
  body: Record<string, unknown>,
) {
  const res = await tp.request('POST', '/v1/resources', { token: org.token, body });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body as { name: string; port: number; url: string; [k: string]: unknown };
}

/** Whether something accepts TCP connections on 127.0.0.1:`port`. */
export async function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect({ host: '127.0.0.1', port });
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

/** Pids of processes whose command line mentions `needle` (a volume path, a data dir). */
export async function processesMentioning(needle: string): Promise<number[]> {
  const out: number[] = [];
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const cmd = await readFile(path.join('/proc', entry, 'cmdline'), 'utf8').catch(() => '');
    if (cmd.includes(needle)) out.push(Number(entry));
  }
  return out;
}

/** Pids of PostgreSQL postmasters whose arguments name a path under `volumePath`. */
export async function postmastersOf(volumePath: string): Promise<number[]> {
  const out: number[] = [];
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const argv = (await readFile(path.join('/proc', entry, 'cmdline'), 'utf8').catch(() => ''))
      .split('\0')
      .filter(Boolean);
    if (path.basename(argv[0] ?? '') !== 'postgres') continue;
    if (argv.some((a) => a.startsWith(volumePath))) out.push(Number(entry));
  }
  return out;
}

/** The platform's database runtime, which tests look inside (the local one). */
export function localDatabases(tp: TestPlatform): LocalDatabaseRuntime {
  return tp.platform.ctx.databases as LocalDatabaseRuntime;
}

/** The platform's storage pool, which holds the databases' volumes. */
export async function storagePool(tp: TestPlatform): Promise<StoragePool> {
  return (await tp.platform.ctx.pool.get()).pool;
}

/** Names of the volumes in the platform's storage pool. */
export async function poolVolumes(tp: TestPlatform): Promise<string[]> {
  return (await storagePool(tp)).list();
}
