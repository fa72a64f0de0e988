/**
 * PostgreSQL databases through the API: validation of every bound, create with its URL
 * once, TLS with the platform CA, records without secrets, organization scope, PATCH,
 * attach/detach of DATABASE_URL, and delete leaving nothing behind.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MACHINE_CA_PATH } from '../../src/crypto/ca.js';
import { refreshAttachmentUrls } from '../../src/services/attachment-urls.js';
import { revealSecrets } from '../../src/services/secrets.js';
import { startTestPlatform, type TestOrg, type TestPlatform } from '../helpers/platform.js';
import {
  createDatabase,
  listening,
  pgClient,
  platformCa,
  poolVolumes,
  processesMentioning,
  query,
  storagePool,
} from './helpers.js';

let tp: TestPlatform;
let org: TestOrg;
let other: TestOrg;
let ca: string;
let main: { name: string; port: number; url: string };

beforeAll(async () => {
  tp = await startTestPlatform();
  org = await tp.createOrg();
  other = await tp.createOrg();
  main = await createDatabase(tp, org, {
    name: 'shop-db',
    kind: 'postgres',
    memoryMb: 512,
    flushIntervalS: 30,
  });
  ca = await platformCa(tp);
}, 120_000);
afterAll(async () => tp?.close());

const req = (method: string, p: string, body?: unknown, token = org.token) =>
  tp.request(method, p, { token, body });

describe('create', () => {
  it('answers 201 with the record and a URL that works over TLS as role app', async () => {
    expect(main).toMatchObject({
      name: 'shop-db',
      kind: 'postgres',
      secretKey: 'DATABASE_URL',
      durability: 'standard',
      state: 'ready',
      memoryMb: 512,
      suspendPolicy: { mode: 'suspend', idleSeconds: 300 },
    });
    expect(main.url).toMatch(
      /^postgresql:\/\/app:[A-Za-z0-9]{32}@127\.0\.0\.1:\d+\/app\?sslmode=require$/,
    );
    expect(new URL(main.url).port).toBe(String(main.port));
    const rows = await query<{ user: string; ssl: boolean }>(
      main.url,
      ca,
      'SELECT current_user AS user, ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()',
    );
    expect(rows).toEqual([{ user: 'app', ssl: true }]);
  });

  it('reflects memoryMb and flushIntervalS in the server settings', async () => {
    const [row] = await query<{ shared_buffers: string }>(main.url, ca, 'SHOW shared_buffers');
    expect(row!.shared_buffers).toBe('128MB');
    const [t] = await query<{ archive_timeout: string }>(main.url, ca, 'SHOW archive_timeout');
    expect(t!.archive_timeout).toBe('30s');
  });

  it('refuses a wrong password and a connection without TLS', async () => {
    const bad = new URL(main.url);
    bad.password = 'wrong-password';
    await expect(query(bad.toString(), ca, 'SELECT 1')).rejects.toThrow(
      /password authentication failed/,
    );
    const u = new URL(main.url);
    const plain = new (await import('pg')).default.Client({
      host: u.hostname,
      port: Number(u.port),
      user: 'app',
      password: decodeURIComponent(u.password),
      database: 'app',
      ssl: false,
    });
    await expect(plain.connect()).rejects.toThrow(/no pg_hba.conf entry|rejects|SSL/i);
  });

  it('applies an ICU locale', async () => {
    const db = await createDatabase(tp, org, {
      name: 'shop-de',
      kind: 'postgres',
      locale: 'de-DE',
    });
    const [row] = await query<{ locale: string }>(
      db.url,
      ca,
      "SELECT daticulocale AS locale FROM pg_database WHERE datname = 'app'",
    );
    expect(row!.locale).toBe('de-DE');
    expect((await req('DELETE', '/v1/resources/shop-de')).status).toBe(204);
  });

  it('reports every problem of a bad body at once', async () => {
    const res = await req('POST', '/v1/resources', {
      name: 'Bad_Name',
      kind: 'mysql',
      memoryMb: 64,
      sizeGb: 501,
      flushIntervalS: 5,
      suspendPolicy: { mode: 'stop', idleSeconds: 5, stopAfterSeconds: 20 },
      extra: 1,
    });
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('bad-request');
    const paths = res.body.issues.map((i: { path: string }) => i.path).sort();
    expect(paths).toEqual(
      expect.arrayContaining([
        'name',
        'kind',
        'memoryMb',
        'sizeGb',
        'flushIntervalS',
        'suspendPolicy.idleSeconds',
        'extra',
      ]),
    );
  });

  it('refuses zone-redundant with a sentence, and postgres-only fields on redis', async () => {
    const zone = await req('POST', '/v1/resources', {
      name: 'zr',
      kind: 'postgres',
      durability: 'zone-redundant',
    });
    expect(zone.status).toBe(400);
    expect(zone.body.error).toMatch(/zone-redundant is not offered/);
    const redis = await req('POST', '/v1/resources', {
      name: 'rr',
      kind: 'redis',
      locale: 'en-US',
      durability: 'host-redundant',
    });
    expect(redis.status).toBe(400);
    expect(redis.body.issues.map((i: { path: string }) => i.path).sort()).toEqual([
      'durability',
      'locale',
    ]);
  });

  it('checks the sleep policy rules', async () => {
    const res = await req('POST', '/v1/resources', {
      name: 'sp',
      kind: 'postgres',
      suspendPolicy: { mode: 'suspend', idleSeconds: 60, stopAfterSeconds: 30 },
    });
    expect(res.status).toBe(400);
    expect(res.body.issues).toEqual([
      { path: 'suspendPolicy.stopAfterSeconds', message: 'must be greater than idleSeconds' },
    ]);
  });

  it('answers name-taken across kinds and organizations, and name-reserved', async () => {
    await req('POST', '/v1/buckets', { name: 'taken-name' });
    const taken = await req('POST', '/v1/resources', { name: 'taken-name', kind: 'postgres' });
    expect(taken.status).toBe(409);
    expect(taken.body.code).toBe('name-taken');
    const theirs = await req(
      'POST',
      '/v1/resources',
      { name: 'shop-db', kind: 'redis' },
      other.token,
    );
    expect(theirs.body.code).toBe('name-taken');
    const reserved = await req('POST', '/v1/resources', { name: 'pier-db', kind: 'postgres' });
    expect(reserved.status).toBe(400);
    expect(reserved.body.code).toBe('name-reserved');
  });
});

describe('records', () => {
  it('lists and reads without any URL or password', async () => {
    const list = await req('GET', '/v1/resources');
    expect(list.status).toBe(200);
    expect(list.body.map((d: { name: string }) => d.name)).toContain('shop-db');
    const one = await req('GET', '/v1/resources/shop-db');
    expect(one.status).toBe(200);
    const password = decodeURIComponent(new URL(main.url).password);
    for (const text of [JSON.stringify(list.body), JSON.stringify(one.body)]) {
      expect(text).not.toContain(password);
      expect(text).not.toContain('url');
    }
  });

  it("answers another organization's database exactly like a missing one", async () => {
    const theirs = await req('GET', '/v1/resources/shop-db', undefined, other.token);
    const missing = await req('GET', '/v1/resources/no-such-db', undefined, other.token);
    expect(theirs.status).toBe(404);
    expect(theirs.body.code).toBe('not-found');
    expect(theirs.body.error).toBe(missing.body.error.replace('no-such-db', 'shop-db'));
    expect((await req('DELETE', '/v1/resources/shop-db', undefined, other.token)).status).toBe(404);
    expect((await req('GET', '/v1/resources', undefined, other.token)).body).toEqual([]);
  });

  it('needs a full-access key for one record (spec F) and takes read scope for the list', async () => {
    const key = await req('POST', '/v1/tokens', { name: 'reader', scopes: ['read'] });
    expect((await req('GET', '/v1/resources', undefined, key.body.token)).status).toBe(200);
    const one = await req('GET', '/v1/resources/shop-db', undefined, key.body.token);
    expect(one.status).toBe(403);
    expect(one.body.code).toBe('token-scope');
  });

  it('lets production agent tokens read but not create', async () => {
    const agent = await req('POST', '/v1/tokens', { name: 'prod', agent: { class: 'production' } });
    const create = await req(
      'POST',
      '/v1/resources',
      { name: 'by-agent', kind: 'postgres' },
      agent.body.token,
    );
    expect(create.status).toBe(403);
    expect(create.body.code).toBe('agent-token-production-readonly');
    expect((await req('GET', '/v1/resources', undefined, agent.body.token)).status).toBe(200);
  });
});

describe('PATCH', () => {
  it('changes the sleep policy', async () => {
    const res = await req('PATCH', '/v1/resources/shop-db', {
      suspendPolicy: { mode: 'off' },
    });
    expect(res.status).toBe(200);
    expect(res.body.suspendPolicy).toEqual({ mode: 'off', idleSeconds: 300 });
  });

  it('refuses an expiry on an original database, and both expiry fields together', async () => {
    const res = await req('PATCH', '/v1/resources/shop-db', { ttlSeconds: 3600 });
    expect(res.status).toBe(409);
    expect(res.body.code).toBe('not-a-copy');
    const both = await req('PATCH', '/v1/resources/shop-db', {
      ttlSeconds: 3600,
      expiresAt: new Date(Date.now() + 3_600_000).toISOString(),
    });
    expect(both.status).toBe(400);
    const tooShort = await req('PATCH', '/v1/resources/shop-db', { ttlSeconds: 59 });
    expect(tooShort.body.issues[0].path).toBe('ttlSeconds');
  });

  it('answers the URL route of an original with not-a-copy', async () => {
    const res = await req('POST', '/v1/resources/shop-db/url');
    expect(res.status).toBe(409);
    expect(res.body.code).toBe('not-a-copy');
  });
});

describe('attach and detach', () => {
  it('gives the app a managed DATABASE_URL that works, and removes it on detach', async () => {
    const app = await req('POST', '/v1/apps', { name: 'shop' });
    expect(app.status).toBe(201);
    const attached = await req('POST', '/v1/apps/shop/attach', { database: 'shop-db' });
    expect(attached.status).toBe(200);
    expect(attached.body).toEqual({
      appName: 'shop',
      databaseName: 'shop-db',
      injected: ['DATABASE_URL'],
    });
    const env = await revealSecrets(tp.platform.ctx.db, tp.platform.ctx, app.body.id);
    // The URL as machines dial it: same credentials and port, the services host, and
    // TLS verified against the CA every machine holds.
    const seen = new URL(env.DATABASE_URL!);
    const given = new URL(main.url);
    expect(seen.host).toBe(`${tp.platform.config.servicesHost}:${main.port}`);
    expect([seen.username, seen.password, seen.pathname]).toEqual([
      given.username,
      given.password,
      given.pathname,
    ]);
    expect(seen.search).toBe(`?sslmode=verify-full&sslrootcert=${MACHINE_CA_PATH}`);
    const rows = await query<{ one: number }>(
      env.DATABASE_URL!.replace(seen.search, '?sslmode=require'),
      await platformCa(tp),
      'SELECT 1 AS one',
    );
    expect(rows).toEqual([{ one: 1 }]);
    // A changed services host reaches the stored URL at the next start.
    const config = tp.platform.config;
    const host = config.servicesHost;
    config.servicesHost = 'db.pier.internal';
    try {
      expect(await refreshAttachmentUrls(tp.platform.ctx)).toBe(1);
      const moved = await revealSecrets(tp.platform.ctx.db, tp.platform.ctx, app.body.id);
      expect(new URL(moved.DATABASE_URL!).host).toBe(`db.pier.internal:${main.port}`);
    } finally {
      config.servicesHost = host;
      await refreshAttachmentUrls(tp.platform.ctx);
    }
    const secrets = await req('GET', '/v1/apps/shop/secrets');
    expect(secrets.body).toEqual([
      expect.objectContaining({
        name: 'DATABASE_URL',
        managed: true,
        managedReason: 'resource-password',
      }),
    ]);
    const overwrite = await req('PUT', '/v1/apps/shop/secrets', { secrets: { DATABASE_URL: 'x' } });
    expect(overwrite.body.code).toBe('secret-managed');
    expect((await req('POST', '/v1/apps/shop/attach', { database: 'shop-db' })).body.code).toBe(
      'already-attached',
    );
    const detached = await req('POST', '/v1/apps/shop/detach', { database: 'shop-db' });
    expect(detached.status).toBe(200);
    expect((await req('GET', '/v1/apps/shop/secrets')).body).toEqual([]);
    expect((await req('POST', '/v1/apps/shop/detach', { database: 'shop-db' })).body.code).toBe(
      'not-attached',
    );
  });
});

describe('delete', () => {
  it('removes server, data, front and attachments, and frees the name', async () => {
    const before = new Set(await poolVolumes(tp));
    const db = await createDatabase(tp, org, { name: 'gone-db', kind: 'postgres' });
    await req('POST', '/v1/apps', { name: 'gone-app' });
    await req('POST', '/v1/apps/gone-app/attach', { database: 'gone-db' });
    const pool = await storagePool(tp);
    const volume = (await poolVolumes(tp)).find((v) => v.startsWith('pg-') && !before.has(v));
    expect(volume).toBeDefined();
    const volumePath = `${pool.root}/${volume}`;
    expect((await processesMentioning(volumePath)).length).toBeGreaterThan(0);

    expect((await req('DELETE', '/v1/resources/gone-db')).status).toBe(204);
    expect(await processesMentioning(volumePath)).toEqual([]);
    expect(await poolVolumes(tp)).not.toContain(volume);
    expect(await listening(db.port)).toBe(false);
    expect((await req('GET', '/v1/apps/gone-app/secrets')).body).toEqual([]);
    expect((await req('GET', '/v1/resources/gone-db')).status).toBe(404);
    expect((await req('DELETE', '/v1/resources/gone-db')).status).toBe(404);
    // The name is free again.
    expect((await req('POST', '/v1/buckets', { name: 'gone-db' })).status).toBe(201);
  });
});

describe('pgClient', () => {
  it('verifies the server certificate against the platform CA', async () => {
    const c = pgClient(main.url, '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n');
    await expect(c.connect()).rejects.toThrow();
  });
});
