/**
 * A real pier for a benchmark, in this process: its own data dir, its own database, a real
 * listener on a free port. The database is a fresh one on the server named by
 * PIER_BENCH_DATABASE_URL, else on the machine's PostgreSQL when it answers, else the
 * embedded store in the data dir. Everything is removed again by `close()`.
 */
import { randomBytes } from 'node:crypto';
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { resolveConfig, type ConfigInput } from '../../src/config.js';
import { startPlatform } from '../../src/platform.js';

const MACHINE_POSTGRES = 'postgresql://postgres@127.0.0.1:5432/postgres';

export interface BenchPlatform {
  url: string;
  operatorToken: string;
  /** pier's data dir (object bytes live under `objects/`); removed by `close()`. */
  dataDir: string;
  /** Where pier keeps its state in this run, for the report. */
  store: string;
  close(): Promise<void>;
}

export interface BenchOrg {
  id: string;
  /** A full-access API key of the organization. */
  token: string;
}

interface Database {
  url: string;
  drop(): Promise<void>;
}

/** `overrides`: settings a benchmark needs (a loopback webhook receiver needs private targets). */
export async function startBenchPlatform(overrides: ConfigInput = {}): Promise<BenchPlatform> {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'pier-bench-'));
  const cleanup: (() => Promise<void>)[] = [() => rm(dataDir, { recursive: true, force: true })];
  // Every step runs even when an earlier one fails; the first failure is reported.
  const close = async () => {
    let failure: unknown;
    for (const step of cleanup.splice(0).reverse()) {
      await step().catch((err: unknown) => (failure ??= err));
    }
    if (failure !== undefined) throw failure;
  };
  try {
    const { database, store } = await pickDatabase();
    if (database) cleanup.push(database.drop);
    else await chmod(dataDir, 0o711); // the embedded store runs as an unprivileged user
    const config = resolveConfig({
      listen: '127.0.0.1:0',
      sshListen: '127.0.0.1:0',
      dataDir,
      databaseUrl: database?.url,
      logLevel: 'silent',
      ...overrides,
    });
    const platform = await startPlatform(config);
    cleanup.push(() => platform.close());
    return { url: platform.url, operatorToken: platform.operatorToken, dataDir, store, close };
  } catch (err) {
    await close().catch(() => {}); // the start-up failure is the one worth reporting
    throw err;
  }
}

/** A new organization made through the operator API, plus `extraKeys` more keys. */
export async function createBenchOrg(p: BenchPlatform, extraKeys = 0): Promise<BenchOrg> {
  const created = await call(
    p.url,
    p.operatorToken,
    'POST',
    '/admin/v1/orgs',
    { name: 'bench' },
    201,
  );
  if (!isRecord(created) || !isRecord(created.org) || typeof created.token !== 'string') {
    throw new Error(`POST /admin/v1/orgs answered an unexpected body: ${JSON.stringify(created)}`);
  }
  const org = { id: String(created.org.id), token: created.token };
  for (let i = 1; i <= extraKeys; i++) {
    await call(p.url, org.token, 'POST', '/v1/tokens', { name: `bench-${i}` }, 201);
  }
  return org;
}

/** One JSON request; anything but `expect` is an error that names the answer. */
export async function call(
  base: string,
  token: string,
  method: string,
  route: string,
  body?: unknown,
  expect = 200,
): Promise<unknown> {
  const res = await fetch(`${base}${route}`, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  if (res.status !== expect) throw new Error(`${method} ${route} answered ${res.status}: ${text}`);
  return text ? (JSON.parse(text) as unknown) : undefined;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

async function pickDatabase(): Promise<{ database?: Database; store: string }> {
  const configured = process.env.PIER_BENCH_DATABASE_URL;
  if (configured) {
    return { database: await createDatabase(configured), store: 'PIER_BENCH_DATABASE_URL' };
  }
  if (await reachable(MACHINE_POSTGRES)) {
    return { database: await createDatabase(MACHINE_POSTGRES), store: 'machine PostgreSQL' };
  }
  return { store: 'embedded store' };
}

async function reachable(url: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2000 });
  try {
    await client.connect();
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => {});
  }
}

/** A fresh database on the server at `adminUrl`, dropped (connections and all) by `drop()`. */
async function createDatabase(adminUrl: string): Promise<Database> {
  const name = `pier_bench_${randomBytes(6).toString('hex')}`;
  await admin(adminUrl, `CREATE DATABASE ${name}`);
  const u = new URL(adminUrl);
  u.pathname = `/${name}`;
  return {
    url: u.toString(),
    drop: () => admin(adminUrl, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`),
  };
}

async function admin(url: string, statement: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(statement);
  } finally {
    await client.end();
  }
}
