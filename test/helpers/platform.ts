/**
 * A real pier for a test file: its own database, its own data dir, a real listener on
 * a free port. Requests go over real HTTP with fetch.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { resolveConfig, type ConfigInput } from '../../src/config.js';
import { startPlatform, type Platform, type PlatformOptions } from '../../src/platform.js';
import { removeDatabaseNow } from '../../src/services/databases/remove.js';
import { createTestDatabase, type TestDatabase } from './database.js';
import { inject } from 'vitest';

export interface ApiAnswer<T = any> {
  status: number;
  body: T;
  headers: Headers;
}

export interface TestPlatform {
  platform: Platform;
  url: string;
  operatorToken: string;
  db: TestDatabase;
  dataDir: string;
  /** A request to the API; `token` is the Bearer; JSON bodies are sent as JSON. */
  request<T = any>(method: string, path: string, opts?: RequestOptions): Promise<ApiAnswer<T>>;
  /** A request to the operator API with the operator token. */
  admin<T = any>(method: string, path: string, body?: unknown): Promise<ApiAnswer<T>>;
  /** A new organization with its first admin and full-access key. */
  createOrg(body?: Record<string, unknown>): Promise<TestOrg>;
  close(): Promise<void>;
}

export interface TestOrg {
  id: string;
  token: string;
  userId: string;
}

export interface RequestOptions {
  token?: string;
  body?: unknown;
  headers?: Record<string, string>;
  /** Raw body text, sent as is (for malformed JSON tests). */
  raw?: string;
}

export async function request<T = any>(
  base: string,
  method: string,
  urlPath: string,
  opts: RequestOptions = {},
): Promise<ApiAnswer<T>> {
  const headers: Record<string, string> = { ...opts.headers };
  if (opts.token) headers.authorization = `Bearer ${opts.token}`;
  let body: string | undefined;
  if (opts.raw !== undefined) body = opts.raw;
  else if (opts.body !== undefined) body = JSON.stringify(opts.body);
  if (body !== undefined && !headers['content-type']) headers['content-type'] = 'application/json';
  const res = await fetch(base + urlPath, { method, headers, body });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    // not JSON: keep the text
  }
  return { status: res.status, body: parsed as T, headers: res.headers };
}

let counter = 0;

async function removeAllDatabases(platform: Platform): Promise<void> {
  const rows = await platform.ctx.db
    .selectFrom('databases')
    .select(['org_id', 'name'])
    .execute()
    .catch(() => []);
  for (const r of rows) {
    await removeDatabaseNow(platform.ctx, r.org_id, r.name).catch(() => {});
  }
}

/** The user-name prefix of this run's database identities (helpers/identities.ts). */
export function testIdentityPrefix(): string {
  return inject('identityPrefix');
}

export async function startTestPlatform(
  overrides: ConfigInput = {},
  opts: PlatformOptions = {},
  reuse?: { db: TestDatabase; dataDir: string },
): Promise<TestPlatform> {
  const db = reuse?.db ?? (await createTestDatabase());
  const dataDir = reuse?.dataDir ?? (await mkdtemp(path.join(os.tmpdir(), 'pier-test-')));
  const config = resolveConfig({
    listen: '127.0.0.1:0',
    // Without machines, the test (on the host) dials the URLs attachments inject, so the
    // services host is loopback; a test with a machines network gets the default (its
    // gateway), as machines would.
    ...(overrides.machinesCidr ? {} : { servicesHost: '127.0.0.1' }),
    servicesPort: 0,
    // Not the default 2222: test files run side by side.
    sshListen: '127.0.0.1:0',
    dataDir,
    databaseUrl: db.url,
    logLevel: 'silent',
    // Identities of test databases carry their run's prefix (helpers/identities.ts).
    databaseUserPrefix: testIdentityPrefix(),
    ...overrides,
  });
  const platform = await startPlatform(config, {
    logger: pino({ level: config.logLevel }),
    ...opts,
  });
  const tp: TestPlatform = {
    platform,
    url: platform.url,
    operatorToken: platform.operatorToken,
    db,
    dataDir,
    request: (method, p, o) => request(platform.url, method, p, o),
    admin: (method, p, body) =>
      request(platform.url, method, p, { token: platform.operatorToken, body }),
    async createOrg(body = {}) {
      const res = await tp.admin('POST', '/admin/v1/orgs', { name: `org ${++counter}`, ...body });
      if (res.status !== 201)
        throw new Error(`org create failed: ${res.status} ${JSON.stringify(res.body)}`);
      return { id: res.body.org.id, token: res.body.token, userId: res.body.user.id };
    },
    async close() {
      // Databases outlive `pier serve` by design; a test leaves none running behind it.
      await removeAllDatabases(platform);
      await platform.close();
      await db.drop();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
  return tp;
}

/**
 * Stops the platform as SIGTERM would (servers it started keep running) and starts a new
 * one on the same data dir and state store, as a restart of `pier serve` does.
 */
export async function restartTestPlatform(
  tp: TestPlatform,
  overrides: ConfigInput = {},
): Promise<TestPlatform> {
  await tp.platform.close();
  return startTestPlatform(overrides, {}, { db: tp.db, dataDir: tp.dataDir });
}
