/**
 * What the engine tests share: a pool in a temp directory, the platform CA, the service
 * user, free ports, instance specs, TLS clients as the customer, and a cleanup that stops
 * every server and removes everything even when a test failed halfway.
 */
import { randomBytes } from 'node:crypto';
import { chmod, mkdtemp, readdir, readFile, readlink, rm } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { ensureCa } from '../../crypto/ca.js';
import { DirectoryPool } from '../../storage/pool/directory-pool.js';
import type { StoragePool } from '../../storage/pool/pool.js';
import { resolveServiceUser } from '../../host/service-user.js';
import type { EngineEnv, InstanceSpec } from '../engine.js';
import { PostgresEngine } from './index.js';
import { discardVolume } from './instance.js';

/** One test file's world. */
export interface TestEnv {
  dir: string;
  env: EngineEnv;
  engine: PostgresEngine;
  /** The CA certificate (PEM) clients verify the server with. */
  ca: string;
  /** Things the engine logged (to check, say, that a template was built once). */
  logged: string[];
  /** A fresh instance spec with a free port. */
  instance(over?: Partial<InstanceSpec>): Promise<InstanceSpec>;
  /** A customer connection over TLS to `inst` (as `app`, its password, database `app`). */
  connect(inst: InstanceSpec, over?: Partial<pg.ClientConfig>): Promise<pg.Client>;
  /** Runs one query as the customer and closes the connection. */
  query<T extends pg.QueryResultRow = pg.QueryResultRow>(
    inst: InstanceSpec,
    sql: string,
    params?: unknown[],
  ): Promise<T[]>;
  cleanup(): Promise<void>;
}

const usedPorts = new Set<number>();

/** A TCP port on 127.0.0.1 nothing listens on now (and not handed out before). */
export async function freePort(): Promise<number> {
  for (;;) {
    const port = await new Promise<number>((resolve, reject) => {
      const srv = net.createServer();
      srv.once('error', reject);
      srv.listen(0, '127.0.0.1', () => {
        const { port } = srv.address() as net.AddressInfo;
        srv.close(() => resolve(port));
      });
    });
    if (!usedPorts.has(port)) {
      usedPorts.add(port);
      return port;
    }
  }
}

/** A short random suffix for ids and volume names. */
export function rand(): string {
  return randomBytes(4).toString('hex');
}

/** Makes a test world; `pool` replaces the default directory pool (a btrfs one, say). */
export async function makeTestEnv(
  label: string,
  opts: { pool?: (dir: string) => Promise<StoragePool> } = {},
): Promise<TestEnv> {
  const dir = await mkdtemp(path.join(os.tmpdir(), `pier-pg-${label}-`));
  await chmod(dir, 0o711); // the service user passes through to the pool
  const pool = opts.pool
    ? await opts.pool(path.join(dir, 'pool'))
    : await DirectoryPool.open({ dir: path.join(dir, 'pool') });
  const tls = await ensureCa(path.join(dir, 'ca'), ['localhost']);
  const logged: string[] = [];
  const env: EngineEnv = {
    pool,
    user: await resolveServiceUser('pier'),
    stateDir: path.join(dir, 'state'),
    tls: { certFile: tls.certFile, keyFile: tls.keyFile, caFile: tls.caFile },
    log: { info: (_o, msg) => void logged.push(msg), warn: (_o, msg) => void logged.push(msg) },
  };
  const ca = await readFile(tls.caFile, 'utf8');
  const engine = new PostgresEngine();

  const connect = async (inst: InstanceSpec, over: Partial<pg.ClientConfig> = {}) => {
    const client = new pg.Client({
      host: '127.0.0.1',
      port: inst.internalPort,
      user: 'app',
      password: inst.password,
      database: 'app',
      ssl: { ca, servername: 'localhost' },
      connectionTimeoutMillis: 10_000,
      ...over,
    });
    client.on('error', () => undefined);
    await client.connect();
    return client;
  };

  return {
    dir,
    env,
    engine,
    ca,
    logged,
    async instance(over = {}) {
      const id = `dbi-${rand()}`;
      return {
        id,
        volume: id,
        internalPort: await freePort(),
        memoryMb: 256,
        sizeGb: 1,
        password: `pw-${randomBytes(12).toString('base64url')}`,
        ...over,
      };
    },
    connect,
    async query(inst, sql, params) {
      const client = await connect(inst);
      try {
        return (await client.query(sql, params)).rows;
      } finally {
        await client.end();
      }
    },
    async cleanup() {
      for (const volume of await pool.list().catch(() => [] as string[])) {
        await discardVolume(env, volume).catch(() => undefined);
      }
      await pool.close().catch(() => undefined);
      if (pool.kind === 'directory') await rm(dir, { recursive: true, force: true });
    },
  };
}

/** Pids of live processes whose command line or working directory mentions `text`. */
export async function processesMentioning(text: string): Promise<number[]> {
  const found: number[] = [];
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    const cmdline = await readFile(`/proc/${entry}/cmdline`, 'utf8').catch(() => '');
    const cwd = await readlink(`/proc/${entry}/cwd`).catch(() => '');
    if (cmdline.includes(text) || cwd.includes(text)) found.push(Number(entry));
  }
  return found;
}
