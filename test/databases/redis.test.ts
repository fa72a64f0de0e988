/**
 * Redis databases through the API with a real client (ioredis over TLS, the platform
 * CA): create with its URL, the ACL user, persistence, branch, fork to a moment from the
 * timestamped AOF, its pruning to the point-in-time window, the refusals that make sense,
 * attach as REDIS_URL, and delete.
 */
import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { enqueue } from '../../src/jobs/queue.js';
import { pruneHistory } from '../../src/services/databases/archives.js';
import { startTestPlatform, type TestOrg, type TestPlatform } from '../helpers/platform.js';
import { createDatabase, platformCa, settled, sleep, storagePool, waitFor } from './helpers.js';

let tp: TestPlatform;
let org: TestOrg;
let ca: string;
const clients: Redis[] = [];

const req = (method: string, p: string, body?: unknown) =>
  tp.request(method, p, { token: org.token, body });

/** A client from a handed-out `rediss://` URL, verifying the platform CA. */
async function connect(url: string): Promise<Redis> {
  const u = new URL(url);
  expect(u.protocol).toBe('rediss:');
  const c = new Redis({
    host: u.hostname,
    port: Number(u.port),
    username: decodeURIComponent(u.username),
    password: decodeURIComponent(u.password),
    tls: { ca, servername: 'localhost' },
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
  c.on('error', () => {});
  await c.connect();
  clients.push(c);
  return c;
}

/** Waits until the clock is just past a second boundary (AOF annotations are per second). */
async function pastSecond(): Promise<void> {
  await sleep(1000 - (Date.now() % 1000) + 30);
}

let cache: { name: string; url: string };

beforeAll(async () => {
  tp = await startTestPlatform();
  org = await tp.createOrg();
  ca = await platformCa(tp);
  cache = await createDatabase(tp, org, { name: 'cache', kind: 'redis', persistent: true });
}, 60_000);
afterAll(async () => {
  for (const c of clients) c.disconnect();
  await tp?.close();
});

describe('redis', () => {
  it('creates a TLS redis with ACL user app, answered with REDIS_URL', async () => {
    expect(cache).toMatchObject({
      kind: 'redis',
      secretKey: 'REDIS_URL',
      persistent: true,
      state: 'ready',
    });
    expect(cache.url).toMatch(/^rediss:\/\/app:[A-Za-z0-9]{32}@127\.0\.0\.1:\d+$/);
    const c = await connect(cache.url);
    expect(await c.set('greeting', 'hello')).toBe('OK');
    expect(await c.get('greeting')).toBe('hello');
    expect(await c.acl('WHOAMI')).toBe('app');
    await expect(c.call('CONFIG', 'SET', 'maxmemory', '1')).rejects.toThrow(/NOPERM/);
  });

  it('refuses a wrong password', async () => {
    const bad = new URL(cache.url);
    bad.password = 'nope';
    await expect(connect(bad.toString())).rejects.toThrow();
  });

  it('branches: an independent copy of the data as it is now', async () => {
    const c = await connect(cache.url);
    await c.set('k', 'before');
    const res = await req('POST', '/v1/resources/cache/branch', { name: 'cache-b' });
    expect(res.status).toBe(202);
    expect((await settled(tp, org, 'cache-b')).state).toBe('ready');
    const url = (await req('POST', '/v1/resources/cache-b/url')).body.url as string;
    const b = await connect(url);
    expect(await b.get('k')).toBe('before');
    await b.set('k', 'branch');
    await c.set('k2', 'source');
    expect(await c.get('k')).toBe('before');
    expect(await b.get('k2')).toBeNull();
  });

  it('forks to a moment: writes of later seconds are not in it', async () => {
    const c = await connect(cache.url);
    await pastSecond();
    await c.set('when', 'early');
    const asOf = new Date().toISOString();
    await pastSecond();
    await c.set('when', 'late');
    await c.set('late-only', '1');
    const res = await req('POST', '/v1/resources/cache/fork', { name: 'cache-then', asOf });
    expect(res.status, JSON.stringify(res.body)).toBe(202);
    const done = await settled(tp, org, 'cache-then');
    expect(done.state, done.stateReason).toBe('ready');
    const f = await connect((await req('POST', '/v1/resources/cache-then/url')).body.url);
    expect(await f.get('when')).toBe('early');
    expect(await f.get('late-only')).toBeNull();
    expect(await f.get('greeting')).toBe('hello');
  });

  it('prunes its AOF to the window: forks inside it are right, older moments get 422 and the oldest', async () => {
    const db = tp.platform.store.db;
    const row = await db
      .selectFrom('databases')
      .selectAll()
      .where('name', '=', 'cache')
      .where('org_id', '=', org.id)
      .executeTakeFirstOrThrow();
    const primary = await db
      .selectFrom('database_instances')
      .selectAll()
      .where('database_id', '=', row.id)
      .where('role', '=', 'primary')
      .executeTakeFirstOrThrow();
    const volume = (await (await storagePool(tp)).info(primary.volume))!.path;
    const generations = () => readdir(path.join(volume, 'aof-history')).catch(() => []);
    /** Runs the daily base-backup job now: for Redis a new base, then pruning. */
    const baseBackup = async () => {
      const id = await enqueue(
        db,
        tp.platform.ctx.jobs,
        'databases.base-backup',
        { databaseId: row.id },
        { dedupeKey: `${row.id}@test-${Date.now()}` },
      );
      await waitFor(async () => {
        const job = await db
          .selectFrom('jobs')
          .select('state')
          .where('id', '=', id!)
          .executeTakeFirst();
        return job?.state === 'done';
      }, 'the base-backup job');
    };

    const c = await connect(cache.url);
    await c.set('era', 'old');
    await pastSecond();
    const asOfOld = new Date().toISOString();
    await pastSecond();
    await baseBackup();
    const rotated = Date.now();
    await sleep(1000);
    await c.set('era', 'mid');
    await pastSecond();
    const asOfMid = new Date().toISOString();
    await pastSecond();
    await c.set('era', 'new');
    await baseBackup();
    const before = await generations();
    expect(before.length).toBeGreaterThanOrEqual(2);

    // A window starting just after the first rotation: older generations go.
    const config = tp.platform.ctx.config;
    const saved = config.pitrWindowDays;
    config.pitrWindowDays = (Date.now() - rotated - 100) / 86_400_000;
    try {
      await pruneHistory(tp.platform.ctx, row.id);
      expect((await generations()).length).toBeLessThan(before.length);

      const old = await req('POST', '/v1/resources/cache/fork', {
        name: 'cache-old',
        asOf: asOfOld,
      });
      expect(old.status, JSON.stringify(old.body)).toBe(422);
      expect(old.body.error).toMatch(/kept for/);
      const oldest = Date.parse(old.body.oldest);
      expect(oldest).toBeGreaterThan(Date.parse(asOfOld));
      expect(oldest).toBeLessThanOrEqual(Date.parse(asOfMid));

      const mid = await req('POST', '/v1/resources/cache/fork', {
        name: 'cache-mid',
        asOf: asOfMid,
      });
      expect(mid.status, JSON.stringify(mid.body)).toBe(202);
    } finally {
      config.pitrWindowDays = saved;
    }
    expect((await req('GET', '/v1/resources/cache-old')).status).toBe(404);
    const done = await settled(tp, org, 'cache-mid');
    expect(done.state, done.stateReason).toBe('ready');
    const f = await connect((await req('POST', '/v1/resources/cache-mid/url')).body.url);
    expect(await f.get('era')).toBe('mid');
    expect(await f.get('greeting')).toBe('hello');
  }, 120_000);

  it('refuses a fork of a non-persistent redis, saying why', async () => {
    await createDatabase(tp, org, { name: 'volatile', kind: 'redis' });
    const res = await req('POST', '/v1/resources/volatile/fork', { name: 'volatile-f' });
    expect(res.status).toBe(422);
    expect(res.body.error).toMatch(/not persistent/);
  });

  it('sleeps by its policy, keeps its data, and wakes on connect', async () => {
    const c = await connect(cache.url);
    await c.set('durable', 'yes');
    c.disconnect();
    const patched = await req('PATCH', '/v1/resources/cache', {
      suspendPolicy: { mode: 'stop', idleSeconds: 10 },
    });
    expect(patched.status).toBe(200);
    await waitFor(
      async () => (await req('GET', '/v1/resources/cache')).body.power === 'stopped',
      'cache to stop',
      25_000,
    );
    const again = await connect(cache.url); // the front starts it on connect
    expect(await again.get('durable')).toBe('yes');
    expect((await req('GET', '/v1/resources/cache')).body.power).toBe('running');
  });

  it('attaches as REDIS_URL and deletes cleanly', async () => {
    await req('POST', '/v1/apps', { name: 'worker' });
    const att = await req('POST', '/v1/apps/worker/attach', { database: 'cache' });
    expect(att.body).toEqual({ appName: 'worker', databaseName: 'cache', injected: ['REDIS_URL'] });
    expect((await req('DELETE', '/v1/resources/cache-b')).status).toBe(204);
    expect((await req('GET', '/v1/resources/cache-b')).status).toBe(404);
  });
});
