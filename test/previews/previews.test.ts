/**
 * Preview environments (issue #26 item 3) on a real platform: an app with a Postgres
 * database, a bucket, a secret and a live release gets a preview `shop--<name>` that runs
 * the release on its own address through the proxy, with its own copy-on-write branch of
 * the database in place of the original (a write there never reaches production), the
 * bucket read-only and the secret copied. Delete and expiry remove exactly what it made;
 * another organization's key, a read-only key and the app limit are refused.
 */
import http from 'node:http';
import { DeleteObjectCommand, GetObjectCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { busyboxLayer } from '../../src/runtime/images/build.test-helper.js';
import { revealSecrets } from '../../src/services/secrets.js';
import { expirePreviews } from '../../src/services/previews/remove.js';
import { credentialsFor, s3Client, sdkError } from '../buckets/helpers.js';
import { platformCa, query } from '../databases/helpers.js';
import { canRunMachines, startMachineBed, type MachineBed } from '../machines/bed.js';
import type { TestOrg } from '../helpers/platform.js';

let bed: MachineBed;
let other: TestOrg;
let readOnly: string;
let ca: string;
let prodUrl: string;
let image: string;

const DAY_MS = 24 * 3600_000;
const cfg = { internalPort: 8080, memoryMb: 128, killTimeoutS: 1 };

function viaProxy(app: string, path = '/'): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const r = http.get(`${bed.tp.url}${path}`, { headers: { host: `${app}.127.0.0.1` } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text: text.trim() }));
    });
    r.on('error', reject);
  });
}

async function until<T>(what: string, fn: () => Promise<T | undefined>, ms = 120_000) {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** Makes the preview and waits until it leaves `creating`; answers the 202 body and the end. */
async function makePreview(name: string, body: Record<string, unknown> = {}) {
  const res = await bed.req('POST', '/v1/apps/shop/previews', { name, ...body });
  expect(res.status, JSON.stringify(res.body)).toBe(202);
  const done = await until(`preview ${name}`, async () => {
    const r = await bed.req('GET', `/v1/apps/shop/previews/${name}`);
    return r.body.state === 'creating' ? undefined : r.body;
  });
  expect(done.state, JSON.stringify(done)).toBe('ready');
  return { accepted: res.body, ready: done };
}

const appId = async (name: string) =>
  (
    await bed.tp.platform.ctx.db
      .selectFrom('apps')
      .select('id')
      .where('name', '=', name)
      .executeTakeFirst()
  )?.id;

async function productionRows(): Promise<string[]> {
  return (await query<{ label: string }>(prodUrl, ca, 'SELECT label FROM items ORDER BY id')).map(
    (r) => r.label,
  );
}

beforeAll(async () => {
  if (!canRunMachines) return;
  bed = await startMachineBed('pv', 150);
  other = await bed.tp.createOrg();
  ca = await platformCa(bed.tp);
  image = await bed.image('shop:1', {
    layers: [busyboxLayer(), [{ path: 'srv/index.html', content: 'v1' }]],
    config: {
      Cmd: ['/bin/sh', '-c', 'echo "$GREETING" > /srv/env.txt; exec httpd -f -p 8080 -h /srv'],
    },
  });
  expect((await bed.req('POST', '/v1/apps', { name: 'shop' })).status).toBe(201);
  const db = await bed.req('POST', '/v1/resources', { name: 'shopdb', kind: 'postgres' });
  expect(db.status, JSON.stringify(db.body)).toBe(201);
  prodUrl = db.body.url;
  await query(prodUrl, ca, 'CREATE TABLE items (id int PRIMARY KEY, label text)');
  await query(prodUrl, ca, "INSERT INTO items VALUES (1, 'production')");
  expect((await bed.req('POST', '/v1/apps/shop/attach', { database: 'shopdb' })).status).toBe(200);
  expect((await bed.req('POST', '/v1/buckets', { name: 'shop-assets' })).status).toBe(201);
  expect((await bed.req('POST', '/v1/apps/shop/attach', { bucket: 'shop-assets' })).status).toBe(
    200,
  );
  const person = await credentialsFor(bed.tp, bed.org, 'shop-assets');
  await s3Client({ ...person, endpoint: `${bed.tp.url}/s3` }).send(
    new PutObjectCommand({ Bucket: 'shop-assets', Key: 'logo.txt', Body: 'logo' }),
  );
  const secrets = await bed.req('PUT', '/v1/apps/shop/secrets', { secrets: { GREETING: 'hi' } });
  expect(secrets.status, JSON.stringify(secrets.body)).toBe(200);
  const dep = await bed.req('POST', '/v1/apps/shop/deploys', { image, config: cfg });
  expect(dep.status, JSON.stringify(dep.body)).toBe(202);
  await until('the deploy', async () => {
    const d = await bed.req('GET', `/v1/deploys/${dep.body.id}`);
    if (d.body.status === 'error') throw new Error(d.body.error);
    return d.body.status === 'done' ? d.body : undefined;
  });
  const key = await bed.req('POST', '/v1/tokens', { name: 'reader', scopes: ['read'] });
  expect(key.status).toBe(201);
  readOnly = key.body.token;
}, 180_000);

afterAll(async () => bed?.close(), 120_000);

describe.skipIf(!canRunMachines)('previews', () => {
  it('makes shop--feat: its own address, the release, a branch of the database, read-only buckets', async () => {
    const before = Date.now();
    const { accepted, ready } = await makePreview('feat');
    expect(accepted).toMatchObject({ name: 'feat', app: 'shop', appName: 'shop--feat' });
    expect(accepted.state).toBe('creating');
    // The default lifetime: 7 days.
    const ttl = new Date(accepted.expiresAt).getTime() - before;
    expect(ttl).toBeGreaterThan(7 * DAY_MS - 60_000);
    expect(ttl).toBeLessThan(7 * DAY_MS + 60_000);
    expect(ready).toMatchObject({
      release: 1,
      databases: [{ source: 'shopdb', branch: 'shop--feat--shopdb' }],
      buckets: ['shop-assets'],
    });
    expect(ready.defaultAddress).toContain('shop--feat.');
    expect(ready.deploy).toMatch(/^dpl-/);

    // Its own address, through the proxy: the app's release, with the app's secret.
    expect(await viaProxy('shop--feat')).toEqual({ status: 200, text: 'v1' });
    expect(await viaProxy('shop--feat', '/env.txt')).toEqual({ status: 200, text: 'hi' });

    // Its DATABASE_URL is the branch's: production's data as of the branch, and a write
    // there stays there.
    const ctx = bed.tp.platform.ctx;
    const managed = await revealSecrets(ctx.db, ctx, (await appId('shop--feat'))!, {
      only: 'managed',
    });
    const prodManaged = await revealSecrets(ctx.db, ctx, (await appId('shop'))!, {
      only: 'managed',
    });
    expect(managed.DATABASE_URL).toBeDefined();
    expect(managed.DATABASE_URL).not.toBe(prodManaged.DATABASE_URL);
    expect(managed.S3_ACCESS_KEY_ID).not.toBe(prodManaged.S3_ACCESS_KEY_ID);
    // As the machines dial it (the services host, `verify-full`); the test checks the
    // certificate against the platform CA just the same.
    const branchUrl = managed.DATABASE_URL!.replace('sslmode=verify-full', 'sslmode=require');
    expect(await query(branchUrl, ca, 'SELECT label FROM items')).toEqual([
      { label: 'production' },
    ]);
    await query(branchUrl, ca, "INSERT INTO items VALUES (2, 'preview')");
    expect((await query(branchUrl, ca, 'SELECT count(*)::int AS n FROM items'))[0]).toEqual({
      n: 2,
    });
    expect(await productionRows()).toEqual(['production']);

    // The bucket key may only read: production's object is there, writes are refused.
    const s3 = s3Client({
      accessKeyId: managed.S3_ACCESS_KEY_ID!,
      secretAccessKey: managed.S3_SECRET_ACCESS_KEY!,
      endpoint: `${bed.tp.url}/s3`,
      region: managed.S3_REGION!,
    });
    const got = await s3.send(new GetObjectCommand({ Bucket: 'shop-assets', Key: 'logo.txt' }));
    expect(await got.Body!.transformToString()).toBe('logo');
    const put = new PutObjectCommand({ Bucket: 'shop-assets', Key: 'x.txt', Body: 'x' });
    expect(await sdkError(s3.send(put))).toMatchObject({ code: 'AccessDenied', status: 403 });
    const rm = new DeleteObjectCommand({ Bucket: 'shop-assets', Key: 'logo.txt' });
    expect(await sdkError(s3.send(rm))).toMatchObject({ code: 'AccessDenied', status: 403 });

    const list = await bed.req('GET', '/v1/apps/shop/previews', undefined, readOnly);
    expect(list.status).toBe(200);
    expect(list.body.map((p: any) => p.name)).toEqual(['feat']);
  }, 180_000);

  it('refuses another org (404), a read-only key (403), duplicates (409), bad names and lifetimes (400)', async () => {
    const otherKey = other.token;
    for (const [method, path, body] of [
      ['POST', '/v1/apps/shop/previews', { name: 'x' }],
      ['GET', '/v1/apps/shop/previews', undefined],
      ['GET', '/v1/apps/shop/previews/feat', undefined],
      ['DELETE', '/v1/apps/shop/previews/feat', undefined],
    ] as const) {
      const r = await bed.req(method, path, body, otherKey);
      expect(r.status, `${method} ${path}`).toBe(404);
      expect(r.body.code).toBe('not-found');
    }
    for (const [method, path, body] of [
      ['POST', '/v1/apps/shop/previews', { name: 'ro' }],
      ['DELETE', '/v1/apps/shop/previews/feat', undefined],
    ] as const) {
      const r = await bed.req(method, path, body, readOnly);
      expect(r.status).toBe(403);
      expect(r.body.code).toBe('token-scope');
    }
    const again = await bed.req('POST', '/v1/apps/shop/previews', { name: 'feat' });
    expect(again.status).toBe(409);
    expect(again.body.code).toBe('already-exists');
    const long = await bed.req('POST', '/v1/apps/shop/previews', { name: 'a'.repeat(60) });
    expect(long.status).toBe(400);
    expect(long.body.code).toBe('bad-request');
    const short = await bed.req('POST', '/v1/apps/shop/previews', { name: 'y', ttlSeconds: 60 });
    expect(short.status).toBe(400);
    const nested = await bed.req('POST', '/v1/apps/shop--feat/previews', { name: 'z' });
    expect(nested.status).toBe(409);
    // Still exactly one preview: nothing was made by the refusals.
    expect((await bed.req('GET', '/v1/apps/shop/previews')).body).toHaveLength(1);
  }, 60_000);

  it('counts against the app limit like any app', async () => {
    const apps = (await bed.req('GET', '/v1/apps')).body.length;
    const set = await bed.tp.admin('PUT', `/admin/v1/orgs/${bed.org.id}/limits`, { apps });
    expect(set.status, JSON.stringify(set.body)).toBe(200);
    try {
      const r = await bed.req('POST', '/v1/apps/shop/previews', { name: 'over' });
      expect(r.status).toBe(403);
      expect(r.body).toMatchObject({ code: 'org-limit-apps', limit: apps, current: apps });
      expect((await bed.req('GET', '/v1/apps/shop/previews')).body).toHaveLength(1);
    } finally {
      await bed.tp.admin('PUT', `/admin/v1/orgs/${bed.org.id}/limits`, { apps: null });
    }
  });

  it('deletes exactly what it made: its app, machines, branch and key; production untouched', async () => {
    const ctx = bed.tp.platform.ctx;
    const pvAppId = (await appId('shop--feat'))!;
    const keyId = (await revealSecrets(ctx.db, ctx, pvAppId, { only: 'managed' }))
      .S3_ACCESS_KEY_ID!;
    const prodMachines = (await bed.req('GET', '/v1/apps/shop/machines')).body;
    const del = await bed.req('DELETE', '/v1/apps/shop/previews/feat');
    expect(del.status, JSON.stringify(del.body)).toBe(204);
    expect((await bed.req('GET', '/v1/apps/shop/previews/feat')).status).toBe(404);
    expect((await bed.req('GET', '/v1/apps/shop--feat')).status).toBe(404);
    expect((await bed.req('GET', '/v1/resources/shop--feat--shopdb')).status).toBe(404);
    const live = await ctx.db
      .selectFrom('machines')
      .select('id')
      .where('app_id', '=', pvAppId)
      .where('observed_state', '<>', 'deleted')
      .execute();
    expect(live).toEqual([]);
    const key = await ctx.db
      .selectFrom('s3_keys')
      .select('revoked_at')
      .where('id', '=', keyId)
      .executeTakeFirstOrThrow();
    expect(key.revoked_at).not.toBeNull();
    // Production: the app, its machines, its database and data, its bucket.
    expect((await bed.req('GET', '/v1/apps/shop')).status).toBe(200);
    expect((await bed.req('GET', '/v1/apps/shop/machines')).body.map((m: any) => m.id)).toEqual(
      prodMachines.map((m: any) => m.id),
    );
    expect((await bed.req('GET', '/v1/resources/shopdb')).body.state).toBe('ready');
    expect(await productionRows()).toEqual(['production']);
    expect((await bed.req('GET', '/v1/buckets/shop-assets')).status).toBe(200);
    expect(await viaProxy('shop')).toEqual({ status: 200, text: 'v1' });
  }, 120_000);

  it('fails with the reason and takes back what it made when it cannot be made', async () => {
    const ctx = bed.tp.platform.ctx;
    const setState = (state: string) =>
      sql`UPDATE databases SET state = ${state} WHERE name = 'shopdb'`.execute(ctx.db);
    await setState('failed');
    try {
      const res = await bed.req('POST', '/v1/apps/shop/previews', { name: 'bad' });
      expect(res.status).toBe(202);
      const end = await until('the failure', async () => {
        const r = await bed.req('GET', '/v1/apps/shop/previews/bad');
        return r.body.state === 'creating' ? undefined : r.body;
      });
      expect(end).toMatchObject({ state: 'failed', databases: [], buckets: [] });
      expect(end.stateReason).toContain('shopdb');
      expect((await bed.req('GET', '/v1/apps/shop--bad')).status).toBe(404);
    } finally {
      await setState('ready');
    }
    // The failed record stays until deleted; its name can be had again.
    expect((await bed.req('DELETE', '/v1/apps/shop/previews/bad')).status).toBe(204);
    expect((await bed.req('GET', '/v1/apps/shop/previews')).body).toEqual([]);
  }, 60_000);

  it('is removed with what it made once its expiry passes', async () => {
    await makePreview('ttl', { ttlSeconds: 7200 });
    const ctx = bed.tp.platform.ctx;
    await sql`UPDATE previews SET expires_at = now() - interval '1 second' WHERE name = 'ttl'`.execute(
      ctx.db,
    );
    expect(await expirePreviews(ctx)).toBe(1);
    expect((await bed.req('GET', '/v1/apps/shop/previews/ttl')).status).toBe(404);
    expect((await bed.req('GET', '/v1/apps/shop--ttl')).status).toBe(404);
    expect((await bed.req('GET', '/v1/resources/shop--ttl--shopdb')).status).toBe(404);
    expect((await bed.req('GET', '/v1/apps/shop/previews')).body).toEqual([]);
    expect(await productionRows()).toEqual(['production']);
  }, 180_000);
});
