/**
 * Copies of a PostgreSQL database: branch (copy-on-write, independent, its own password),
 * fork to a moment (exactly what was committed up to it), restore in place with the
 * previous state kept as a branch, the one-time URL, and expiry.
 */
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pruneHistory } from '../../src/services/databases/archives.js';
import { startTestPlatform, type TestOrg, type TestPlatform } from '../helpers/platform.js';
import {
  createDatabase,
  platformCa,
  poolVolumes,
  query,
  settled,
  sleep,
  waitFor,
} from './helpers.js';

let tp: TestPlatform;
let org: TestOrg;
let other: TestOrg;
let ca: string;
let src: { name: string; url: string };

const req = (method: string, p: string, body?: unknown, token = org.token) =>
  tp.request(method, p, { token, body });

/** Waits until `atLeast` base backups of `name` are done. */
async function baseBackupDone(name: string, atLeast = 1): Promise<void> {
  await waitFor(async () => {
    const r = await sql<{ n: number }>`SELECT count(*)::int AS n FROM jobs j
        JOIN databases d ON d.id = j.payload->>'databaseId'
        WHERE j.kind = 'databases.base-backup' AND j.state = 'done' AND d.name = ${name}`.execute(
      tp.platform.store.db,
    );
    return (r.rows[0]?.n ?? 0) >= atLeast;
  }, `a base backup of ${name}`);
}

/** The URL of a ready copy, handed out once. */
async function copyUrl(name: string): Promise<string> {
  const res = await req('POST', `/v1/resources/${name}/url`);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.url;
}

async function serverNow(url: string): Promise<string> {
  const [r] = await query<{ now: Date }>(url, ca, 'SELECT now() AS now');
  return r!.now.toISOString();
}

beforeAll(async () => {
  tp = await startTestPlatform({ logLevel: (process.env.PIER_TEST_LOG as 'warn') ?? 'silent' });
  org = await tp.createOrg();
  other = await tp.createOrg();
  ca = await platformCa(tp);
  src = await createDatabase(tp, org, { name: 'orders', kind: 'postgres' });
  await query(src.url, ca, 'CREATE TABLE items (id int PRIMARY KEY, label text)');
  await query(src.url, ca, "INSERT INTO items VALUES (1, 'one')");
}, 120_000);
afterAll(async () => tp?.close());

describe('branch', () => {
  it('answers 202 restoring, becomes ready, and is an independent copy', async () => {
    const res = await req('POST', '/v1/resources/orders/branch', { name: 'orders-dev' });
    expect(res.status).toBe(202);
    expect(res.body).toMatchObject({
      name: 'orders-dev',
      state: 'restoring',
      copyKind: 'branch',
      sourceName: 'orders',
    });
    expect(res.body.sourceAsOf).toBeDefined();
    const ready = await settled(tp, org, 'orders-dev');
    expect(ready.state).toBe('ready');
    const url = await copyUrl('orders-dev');
    expect(url).not.toBe(src.url);
    expect(new URL(url).password).not.toBe(new URL(src.url).password);
    expect(await query(url, ca, 'SELECT id FROM items ORDER BY id')).toEqual([{ id: 1 }]);
    await query(url, ca, "INSERT INTO items VALUES (2, 'branch only')");
    await query(src.url, ca, "INSERT INTO items VALUES (3, 'source only')");
    expect(await query(url, ca, 'SELECT id FROM items ORDER BY id')).toEqual([
      { id: 1 },
      { id: 2 },
    ]);
    expect(await query(src.url, ca, 'SELECT id FROM items ORDER BY id')).toEqual([
      { id: 1 },
      { id: 3 },
    ]);
  });

  it('hands the URL out exactly once', async () => {
    const again = await req('POST', '/v1/resources/orders-dev/url');
    expect(again.status).toBe(409);
    expect(again.body.code).toBe('url-handed-out');
  });

  it('answers not-ready while restoring, 404 for a missing source, name-taken for a used name', async () => {
    const res = await req('POST', '/v1/resources/orders/branch', {
      name: 'orders-tmp',
      ephemeral: true,
    });
    expect(res.status).toBe(202);
    expect(res.body.ephemeral).toBe(true);
    expect(res.body.ephemeralNote).toMatch(/no archive/);
    const early = await req('POST', '/v1/resources/orders-tmp/url');
    if (early.status !== 200) expect(early.body.code).toBe('not-ready');
    await settled(tp, org, 'orders-tmp');
    const missing = await req('POST', '/v1/resources/nope/branch', { name: 'nope-dev' });
    expect(missing.status).toBe(404);
    const theirs = await req('POST', '/v1/resources/orders/branch', { name: 'x-dev' }, other.token);
    expect(theirs.status).toBe(404);
    const taken = await req('POST', '/v1/resources/orders/branch', { name: 'orders-dev' });
    expect(taken.status).toBe(409);
    expect(taken.body.code).toBe('name-taken');
  });

  it('refuses to fork an ephemeral branch: it has no archive', async () => {
    const res = await req('POST', '/v1/resources/orders-tmp/fork', { name: 'orders-tmp-f' });
    expect(res.status).toBe(422);
    expect(res.body.error).toMatch(/ephemeral/);
  });
});

describe('fork', () => {
  it('holds exactly what was committed up to asOf', async () => {
    await baseBackupDone('orders');
    await query(src.url, ca, "INSERT INTO items VALUES (10, 'before')");
    await sleep(300);
    const asOf = await serverNow(src.url);
    await sleep(300);
    await query(src.url, ca, "INSERT INTO items VALUES (11, 'after')");
    const res = await req('POST', '/v1/resources/orders/fork', { name: 'orders-then', asOf });
    expect(res.status, JSON.stringify(res.body)).toBe(202);
    expect(res.body).toMatchObject({ state: 'restoring', copyKind: 'fork', sourceAsOf: asOf });
    const done = await settled(tp, org, 'orders-then');
    expect(done.state, done.stateReason).toBe('ready');
    const url = await copyUrl('orders-then');
    const ids = (await query<{ id: number }>(url, ca, 'SELECT id FROM items ORDER BY id')).map(
      (r) => r.id,
    );
    expect(ids).toContain(10);
    expect(ids).not.toContain(11);
  });

  it('forks as of now by default, with everything committed', async () => {
    await query(src.url, ca, "INSERT INTO items VALUES (20, 'latest')");
    const res = await req('POST', '/v1/resources/orders/fork', {
      name: 'orders-now',
      ttlSeconds: 3600,
    });
    expect(res.status).toBe(202);
    expect((await settled(tp, org, 'orders-now')).state).toBe('ready');
    const url = await copyUrl('orders-now');
    const ids = (await query<{ id: number }>(url, ca, 'SELECT id FROM items')).map((r) => r.id);
    expect(ids).toEqual(expect.arrayContaining([1, 3, 10, 11, 20]));
  });

  it('answers a clear 4xx for a moment in the future or before the archive', async () => {
    const future = await req('POST', '/v1/resources/orders/fork', {
      name: 'orders-future',
      asOf: new Date(Date.now() + 3_600_000).toISOString(),
    });
    expect(future.status).toBe(400);
    expect(future.body.issues[0].path).toBe('asOf');
    const past = await req('POST', '/v1/resources/orders/fork', {
      name: 'orders-past',
      asOf: '2020-01-01T00:00:00Z',
    });
    expect(past.status).toBe(422);
    expect(past.body.error).toMatch(/does not reach 2020-01-01/);
    expect(past.body.oldest).toBeDefined();
    // Nothing was made for either.
    expect((await req('GET', '/v1/resources/orders-past')).status).toBe(404);
  });

  it('answers 422 with the oldest moment for asOf before the point-in-time window', async () => {
    await baseBackupDone('orders');
    // In the archive, but older than a window of one second.
    const asOf = await serverNow(src.url);
    await sleep(1500);
    const config = tp.platform.ctx.config;
    const saved = config.pitrWindowDays;
    config.pitrWindowDays = 1 / 86_400;
    try {
      const res = await req('POST', '/v1/resources/orders/fork', { name: 'orders-old', asOf });
      expect(res.status, JSON.stringify(res.body)).toBe(422);
      expect(res.body.error).toMatch(/kept for/);
      const oldest = Date.parse(res.body.oldest);
      expect(oldest).toBeGreaterThan(Date.parse(asOf));
      expect(Math.abs(oldest - (Date.now() - 1000))).toBeLessThan(5000);
    } finally {
      config.pitrWindowDays = saved;
    }
    expect((await req('GET', '/v1/resources/orders-old')).status).toBe(404);
  });
});

describe('restore in place', () => {
  it('goes back to the moment and keeps the state before as a branch', async () => {
    await query(src.url, ca, 'CREATE TABLE marks (n int)');
    await query(src.url, ca, 'INSERT INTO marks VALUES (1)');
    await sleep(300);
    const asOf = await serverNow(src.url);
    await sleep(300);
    await query(src.url, ca, 'INSERT INTO marks VALUES (2)');
    const res = await req('POST', '/v1/resources/orders/restore', {
      asOf,
      preserveUnderName: 'orders-before',
    });
    expect(res.status, JSON.stringify(res.body)).toBe(202);
    expect(res.body).toMatchObject({
      name: 'orders',
      state: 'restoring',
      preservedUnderName: 'orders-before',
    });
    const done = await settled(tp, org, 'orders');
    expect(done.state).toBe('ready');
    expect(done.stateReason).toBeUndefined();
    // Same URL, same port: the restored data behind it.
    expect(await query(src.url, ca, 'SELECT n FROM marks ORDER BY n')).toEqual([{ n: 1 }]);
    const kept = await settled(tp, org, 'orders-before');
    expect(kept).toMatchObject({ state: 'ready', copyKind: 'branch', sourceName: 'orders' });
    const keptUrl = await copyUrl('orders-before');
    expect(await query(keptUrl, ca, 'SELECT n FROM marks ORDER BY n')).toEqual([
      { n: 1 },
      { n: 2 },
    ]);
  });

  it('names the preserved branch itself when not told', async () => {
    // The restore started a new archive; it needs its own base backup.
    await baseBackupDone('orders', 2);
    const asOf = await serverNow(src.url);
    await sleep(200);
    const res = await req('POST', '/v1/resources/orders/restore', { asOf });
    expect(res.status, JSON.stringify(res.body)).toBe(202);
    expect(res.body.preservedUnderName).toMatch(/^orders-pre-restore-\d+$/);
    expect((await settled(tp, org, 'orders')).state).toBe('ready');
    expect((await settled(tp, org, res.body.preservedUnderName)).state).toBe('ready');
  });

  it('destroys closed timelines once they leave the window, and prunes the current one', async () => {
    // Two restores closed two archives; the current one gets its first base backup.
    await baseBackupDone('orders', 3);
    const db = tp.platform.store.db;
    const row = await db
      .selectFrom('databases')
      .selectAll()
      .where('name', '=', 'orders')
      .where('org_id', '=', org.id)
      .executeTakeFirstOrThrow();
    const archives = await db
      .selectFrom('database_archives')
      .selectAll()
      .where('database_id', '=', row.id)
      .execute();
    const closed = archives.filter((a) => a.covers_until !== null).map((a) => a.id);
    expect(closed).toHaveLength(2);
    expect(await poolVolumes(tp)).toEqual(expect.arrayContaining(closed));

    // Inside a 7-day window they stay.
    await pruneHistory(tp.platform.ctx, row.id);
    expect(await poolVolumes(tp)).toEqual(expect.arrayContaining(closed));

    await sleep(1200);
    const config = tp.platform.ctx.config;
    const saved = config.pitrWindowDays;
    config.pitrWindowDays = 1 / 86_400;
    try {
      await pruneHistory(tp.platform.ctx, row.id);
    } finally {
      config.pitrWindowDays = saved;
    }
    const left = await db
      .selectFrom('database_archives')
      .select('id')
      .where('database_id', '=', row.id)
      .execute();
    expect(left.map((a) => a.id)).toEqual([row.archive_id]);
    const volumes = await poolVolumes(tp);
    for (const id of closed) expect(volumes).not.toContain(id);
    expect(volumes).toContain(row.archive_id);
    // The current timeline still restores to now.
    const res = await req('POST', '/v1/resources/orders/fork', { name: 'orders-after-prune' });
    expect(res.status, JSON.stringify(res.body)).toBe(202);
    expect((await settled(tp, org, 'orders-after-prune')).state).toBe('ready');
  });
});

describe('expiry', () => {
  it('deletes a copy within seconds of expiresAt, with its server and volume', async () => {
    const volumesBefore = new Set(await poolVolumes(tp));
    const res = await req('POST', '/v1/resources/orders/branch', {
      name: 'orders-short',
      ttlSeconds: 3600,
    });
    expect(res.status).toBe(202);
    await settled(tp, org, 'orders-short');
    const made = (await poolVolumes(tp)).filter((v) => !volumesBefore.has(v));
    expect(made.length).toBeGreaterThan(0);
    // Move the expiry to just ahead.
    const soon = new Date(Date.now() + 1500).toISOString();
    const patched = await req('PATCH', '/v1/resources/orders-short', { expiresAt: soon });
    expect(patched.status).toBe(200);
    expect(patched.body.expiresAt).toBe(soon);
    await waitFor(
      async () => (await req('GET', '/v1/resources/orders-short')).status === 404,
      'the copy to expire',
      15_000,
    );
    // Its server volume at once; its archive as soon as a backup in flight lets go of it.
    await waitFor(
      async () => {
        const left = await poolVolumes(tp);
        return made.every((v) => !left.includes(v));
      },
      "the copy's volumes to be gone",
      15_000,
    );
  });

  it('clears an expiry with null', async () => {
    const res = await req('PATCH', '/v1/resources/orders-now', { expiresAt: null });
    expect(res.status).toBe(200);
    expect(res.body.expiresAt).toBeUndefined();
  });
});
