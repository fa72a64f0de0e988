/**
 * The bucket routes of the spec (4.5) and pier's credentials routes: create, names, read,
 * delete, presign, objects, CORS rules, credentials, and who may call them.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, type TestOrg, type TestPlatform } from '../helpers/platform.js';
import {
  createBucket,
  credentialsFor,
  expectS3Error,
  pool,
  s3Client,
  sdkError,
  type Credentials,
} from './helpers.js';

let tp: TestPlatform;
let org: TestOrg;
let other: TestOrg;

beforeAll(async () => {
  tp = await startTestPlatform();
  org = await tp.createOrg();
  other = await tp.createOrg();
});
afterAll(async () => tp?.close());

const req = (method: string, p: string, body?: unknown, token = org.token) =>
  tp.request(method, p, { token, body });

async function putObjects(c: Credentials, keys: string[]): Promise<void> {
  const s3 = s3Client(c);
  await pool(keys, 32, async (Key) => {
    await s3.send(new PutObjectCommand({ Bucket: c.bucket, Key, Body: `body of ${Key}` }));
  });
  s3.destroy();
}

describe('create, read, list', () => {
  it('creates a bucket (201) with every field of the spec', async () => {
    const res = await req('POST', '/v1/buckets', { name: 'photos' });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({
      id: expect.any(String),
      name: 'photos',
      orgId: org.id,
      backendRef: expect.any(String),
      createdAt: expect.any(String),
    });
    expect(new Date(res.body.createdAt).toISOString()).toBe(res.body.createdAt);
    const got = await req('GET', '/v1/buckets/photos');
    expect(got.status).toBe(200);
    expect(got.body).toEqual(res.body);
  });

  it('refuses a name taken anywhere on the platform with 409 name-taken', async () => {
    await createBucket(tp, org, 'taken-bkt');
    const again = await req('POST', '/v1/buckets', { name: 'taken-bkt' });
    expect(again.status).toBe(409);
    expect(again.body.code).toBe('name-taken');
    const byOther = await req('POST', '/v1/buckets', { name: 'taken-bkt' }, other.token);
    expect(byOther.status).toBe(409);
    expect(byOther.body.code).toBe('name-taken');
    // Apps share the namespace.
    const app = await req('POST', '/v1/apps', { name: 'an-app' }, other.token);
    expect(app.status).toBe(201);
    const clash = await req('POST', '/v1/buckets', { name: 'an-app' });
    expect(clash.status).toBe(409);
    expect(clash.body.code).toBe('name-taken');
  });

  it('refuses reserved names with 400 name-reserved and malformed ones with bad-request', async () => {
    for (const name of ['www', 'api', 'console', 'docs', 'pier', 'pier-data', 'objects']) {
      const res = await req('POST', '/v1/buckets', { name });
      expect({ name, status: res.status, code: res.body.code }).toEqual({
        name,
        status: 400,
        code: 'name-reserved',
      });
    }
    for (const name of ['Upper', 'under_score', '-lead', 'trail-', 'ab', 'x'.repeat(64), '']) {
      const res = await req('POST', '/v1/buckets', { name });
      expect({ name, status: res.status, code: res.body.code }).toEqual({
        name,
        status: 400,
        code: 'bad-request',
      });
      expect(res.body.issues[0].path).toBe('name');
    }
    const extra = await req('POST', '/v1/buckets', { name: 'fine-name', region: 'x' });
    expect(extra.status).toBe(400);
  });

  it("lists the organization's own buckets only", async () => {
    await createBucket(tp, other, 'others-bkt');
    const mine = await req('GET', '/v1/buckets');
    expect(mine.status).toBe(200);
    const names = mine.body.map((b: { name: string }) => b.name);
    expect(names).toEqual(expect.arrayContaining(['photos', 'taken-bkt']));
    expect(names).not.toContain('others-bkt');
    expect(names).toEqual([...names].sort());
    const theirs = await req('GET', '/v1/buckets', undefined, other.token);
    expect(theirs.body.map((b: { name: string }) => b.name)).toEqual(['others-bkt']);
    const hidden = await req('GET', '/v1/buckets/others-bkt');
    expect(hidden.status).toBe(404);
    expect(hidden.body.code).toBe('not-found');
    const missing = await req('GET', '/v1/buckets/never-made');
    expect(missing.status).toBe(404);
  });
});

describe('name availability', () => {
  it('answers every reason', async () => {
    await createBucket(tp, org, 'avail-mine');
    await createBucket(tp, other, 'avail-theirs');
    const check = async (name: string) => {
      const res = await req('GET', `/v1/bucket-names/${encodeURIComponent(name)}`);
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      return res.body;
    };
    expect(await check('avail-free')).toEqual({ name: 'avail-free', available: true });
    expect(await check('avail-mine')).toEqual({
      name: 'avail-mine',
      available: false,
      reason: 'taken-by-you',
    });
    expect(await check('avail-theirs')).toEqual({
      name: 'avail-theirs',
      available: false,
      reason: 'taken',
    });
    for (const name of ['www', 'pier', 'pier-x'])
      expect(await check(name)).toEqual({ name, available: false, reason: 'reserved' });
    for (const name of ['Has-Upper', 'under_score', '-x', 'a.b'])
      expect(await check(name)).toEqual({ name, available: false, reason: 'invalid' });
  });

  it('calls a name no bucket can have invalid, the way create refuses it', async () => {
    // Bucket names are 3–63 characters: shorter or longer cannot be created.
    for (const name of ['ab', 'x', 'y'.repeat(64)]) {
      const create = await req('POST', '/v1/buckets', { name });
      expect(create.status).toBe(400);
      const res = await req('GET', `/v1/bucket-names/${name}`);
      expect({ name, status: res.status, body: res.body }).toEqual({
        name,
        status: 200,
        body: { name, available: false, reason: 'invalid' },
      });
    }
  });
});

describe('delete', () => {
  it('deletes an empty bucket: 200 {destroyed, deletedObjects: 0, detached: []}, name free', async () => {
    await createBucket(tp, org, 'del-empty');
    const res = await req('DELETE', '/v1/buckets/del-empty');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ destroyed: true, deletedObjects: 0, detached: [] });
    expect((await req('GET', '/v1/buckets/del-empty')).status).toBe(404);
    expect((await req('DELETE', '/v1/buckets/del-empty')).status).toBe(404);
    const name = await req('GET', '/v1/bucket-names/del-empty');
    expect(name.body).toEqual({ name: 'del-empty', available: true });
    // Another organization can now have it.
    expect((await req('POST', '/v1/buckets', { name: 'del-empty' }, other.token)).status).toBe(201);
  });

  it('refuses a bucket with objects without force (409 bucket-not-empty); force deletes them', async () => {
    await createBucket(tp, org, 'del-full');
    const bucketId = (await req('GET', '/v1/buckets/del-full')).body.id as string;
    const c = await credentialsFor(tp, org, 'del-full');
    await putObjects(c, ['a', 'b/c', 'd']);
    const blobDir = path.join(tp.dataDir, 'objects', bucketId);
    expect(existsSync(blobDir)).toBe(true);
    const refused = await req('DELETE', '/v1/buckets/del-full');
    expect(refused.status).toBe(409);
    expect(refused.body.code).toBe('bucket-not-empty');
    const notForced = await req('DELETE', '/v1/buckets/del-full?force=false');
    expect(notForced.body.code).toBe('bucket-not-empty');
    const bad = await req('DELETE', '/v1/buckets/del-full?force=yes');
    expect(bad.status).toBe(400);
    const s3 = s3Client(c);
    // Used once, so the gateway has the key in its cache when the bucket goes.
    const used = await s3.send(new PutObjectCommand({ Bucket: 'del-full', Key: 'e', Body: 'e' }));
    expect(used.ETag).toBeTruthy();
    const forced = await req('DELETE', '/v1/buckets/del-full?force=true');
    expect(forced.status).toBe(200);
    expect(forced.body).toEqual({ destroyed: true, deletedObjects: 4, detached: [] });
    expect((await req('GET', '/v1/buckets/del-full')).status).toBe(404);
    // The bucket's keys die with it, at once.
    const e = await sdkError(
      s3.send(new PutObjectCommand({ Bucket: 'del-full', Key: 'f', Body: 'f' })),
    );
    expect(e).toMatchObject({ code: 'InvalidAccessKeyId', status: 403 });
    // Its bytes go too, by a background job.
    const deadline = Date.now() + 15_000;
    while (existsSync(blobDir) && Date.now() < deadline) await sleep(100);
    expect(existsSync(blobDir)).toBe(false);
    s3.destroy();
  });

  it("keeps a deleted bucket's name from reaching a new bucket of the same name", async () => {
    await createBucket(tp, org, 'reborn');
    const old = await credentialsFor(tp, org, 'reborn');
    await putObjects(old, ['old-object']);
    expect((await req('DELETE', '/v1/buckets/reborn?force=true')).status).toBe(200);
    await createBucket(tp, other, 'reborn');
    const fresh = await credentialsFor(tp, other, 'reborn');
    await putObjects(fresh, ['new-object']);
    const e = await sdkError(
      s3Client(old).send(new PutObjectCommand({ Bucket: 'reborn', Key: 'x', Body: 'x' })),
    );
    expect(e.code).toBe('InvalidAccessKeyId');
    const listed = await req('GET', '/v1/buckets/reborn/objects', undefined, other.token);
    expect(listed.body.objects.map((o: { key: string }) => o.key)).toEqual(['new-object']);
  });
});

describe('presign', () => {
  let c: Credentials;
  beforeAll(async () => {
    await createBucket(tp, org, 'presign-bkt');
    c = await credentialsFor(tp, org, 'presign-bkt');
  });

  it('mints a GET URL that plain fetch can use', async () => {
    await putObjects(c, ['docs/report.txt']);
    const before = Date.now();
    const res = await req('POST', '/v1/buckets/presign-bkt/presign', { key: 'docs/report.txt' });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      url: expect.stringMatching(new RegExp(`^${tp.url}/s3/presign-bkt/docs/report\\.txt\\?`)),
      method: 'GET',
      key: 'docs/report.txt',
      expiresAt: expect.any(String),
      requiredHeaders: {},
    });
    const ttl = new Date(res.body.expiresAt).getTime() - before;
    expect(ttl).toBeGreaterThan(890_000);
    expect(ttl).toBeLessThanOrEqual(902_000);
    expect(new URL(res.body.url).searchParams.get('X-Amz-Expires')).toBe('900');
    const got = await fetch(res.body.url);
    expect(got.status).toBe(200);
    expect(await got.text()).toBe('body of docs/report.txt');
    // A missing key through a valid URL is S3's NoSuchKey.
    const none = await req('POST', '/v1/buckets/presign-bkt/presign', { key: 'nope' });
    await expectS3Error(fetch(none.body.url), 404, 'NoSuchKey');
  });

  it('mints a PUT URL bound to its Content-Type', async () => {
    const res = await req('POST', '/v1/buckets/presign-bkt/presign', {
      op: 'put',
      key: 'up/photo.jpg',
      contentType: 'image/jpeg',
      expiresInS: 60,
    });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      method: 'PUT',
      key: 'up/photo.jpg',
      requiredHeaders: { 'content-type': 'image/jpeg' },
    });
    await expectS3Error(
      fetch(res.body.url, { method: 'PUT', body: 'jpeg' }),
      403,
      'SignatureDoesNotMatch',
    );
    await expectS3Error(
      fetch(res.body.url, {
        method: 'PUT',
        body: 'jpeg',
        headers: { 'content-type': 'image/png' },
      }),
      403,
      'SignatureDoesNotMatch',
    );
    const ok = await fetch(res.body.url, {
      method: 'PUT',
      body: 'jpeg bytes',
      headers: res.body.requiredHeaders,
    });
    expect(ok.status).toBe(200);
    expect(ok.headers.get('etag')).toMatch(/^"[0-9a-f]{32}"$/);
    // A GET URL does not allow a PUT, nor a PUT URL a GET.
    const get = await req('POST', '/v1/buckets/presign-bkt/presign', { key: 'up/photo.jpg' });
    const fetched = await fetch(get.body.url);
    expect(fetched.headers.get('content-type')).toBe('image/jpeg');
    expect(await fetched.text()).toBe('jpeg bytes');
    await expectS3Error(
      fetch(get.body.url, { method: 'PUT', body: 'x' }),
      403,
      'SignatureDoesNotMatch',
    );
    await expectS3Error(
      fetch(res.body.url, { headers: res.body.requiredHeaders }),
      403,
      'SignatureDoesNotMatch',
    );
  });

  it('signs keys with spaces, unicode and URL metacharacters', async () => {
    const key = 'dir one/naïve ünï+çødé?&=#%.txt';
    const put = await req('POST', '/v1/buckets/presign-bkt/presign', { op: 'put', key });
    const up = await fetch(put.body.url, { method: 'PUT', body: 'odd key' });
    expect(up.status).toBe(200);
    const get = await req('POST', '/v1/buckets/presign-bkt/presign', { key });
    const down = await fetch(get.body.url);
    expect(await down.text()).toBe('odd key');
    const listed = await req(
      'GET',
      `/v1/buckets/presign-bkt/objects?prefix=${encodeURIComponent('dir one/')}`,
    );
    expect(listed.body.objects.map((o: { key: string }) => o.key)).toEqual([key]);
  });

  it('bounds expiresInS to 1–604800 and refuses contentType on a get', async () => {
    const p = (body: unknown) => req('POST', '/v1/buckets/presign-bkt/presign', body);
    for (const expiresInS of [0, -1, 604_801, 1.5, '60']) {
      const res = await p({ key: 'k', expiresInS });
      expect({ expiresInS, status: res.status }).toEqual({ expiresInS, status: 400 });
      expect(res.body.code).toBe('bad-request');
      expect(res.body.issues.map((i: { path: string }) => i.path)).toEqual(['expiresInS']);
    }
    for (const expiresInS of [1, 604_800]) {
      const res = await p({ key: 'k', expiresInS });
      expect(res.status).toBe(200);
      expect(new URL(res.body.url).searchParams.get('X-Amz-Expires')).toBe(String(expiresInS));
    }
    const ct = await p({ op: 'get', key: 'k', contentType: 'text/plain' });
    expect(ct.status).toBe(400);
    expect(ct.body.issues.map((i: { path: string }) => i.path)).toEqual(['contentType']);
    const ctDefault = await p({ key: 'k', contentType: 'text/plain' });
    expect(ctDefault.status).toBe(400);
    for (const body of [
      {},
      { key: '' },
      { key: 'k'.repeat(1025) },
      { key: 'k', op: 'delete' },
      { key: 'k', op: 'put', contentType: '' },
      { key: 'k', op: 'put', contentType: 't'.repeat(256) },
      { key: 'k', extra: 1 },
    ]) {
      const res = await p(body);
      expect({ body, status: res.status }).toEqual({ body, status: 400 });
    }
    expect((await p({ key: 'k'.repeat(1024) })).status).toBe(200);
    const missing = await req('POST', '/v1/buckets/no-such-bkt/presign', { key: 'k' });
    expect(missing.status).toBe(404);
  });
});

describe('objects listing and deletion', () => {
  let c: Credentials;
  const keys = Array.from({ length: 250 }, (_, i) => `page/${String(i).padStart(4, '0')}`);
  beforeAll(async () => {
    await createBucket(tp, org, 'objects-bkt');
    c = await credentialsFor(tp, org, 'objects-bkt');
    await putObjects(c, [...keys, 'other/a', 'other/b', 'zzz']);
  });

  it('pages with limit and nextCursor, visiting every key once', async () => {
    const seen: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const q = new URLSearchParams({ limit: '100', prefix: 'page/' });
      if (cursor) q.set('cursor', cursor);
      const res = await req('GET', `/v1/buckets/objects-bkt/objects?${q}`);
      expect(res.status).toBe(200);
      expect(res.body.bucket).toBe('objects-bkt');
      seen.push(...res.body.objects.map((o: { key: string }) => o.key));
      cursor = res.body.nextCursor;
      pages++;
    } while (cursor);
    expect(pages).toBe(3);
    expect(seen).toEqual(keys);
  });

  it('answers key, sizeBytes and lastModified, with the default limit and a prefix', async () => {
    const res = await req('GET', '/v1/buckets/objects-bkt/objects?prefix=other/');
    expect(res.body).toEqual({
      bucket: 'objects-bkt',
      objects: [
        { key: 'other/a', sizeBytes: 'body of other/a'.length, lastModified: expect.any(String) },
        { key: 'other/b', sizeBytes: 'body of other/b'.length, lastModified: expect.any(String) },
      ],
    });
    const all = await req('GET', '/v1/buckets/objects-bkt/objects');
    expect(all.body.objects).toHaveLength(100);
    expect(all.body.nextCursor).toEqual(expect.any(String));
    const exact = await req('GET', '/v1/buckets/objects-bkt/objects?limit=3&prefix=other/');
    expect(exact.body.nextCursor).toBeUndefined();
  });

  it('refuses bad limits and cursors with 400', async () => {
    for (const q of ['limit=0', 'limit=1001', 'limit=x', 'cursor=%%%', 'cursor=!!', 'other=1']) {
      const res = await req('GET', `/v1/buckets/objects-bkt/objects?${q}`);
      expect({ q, status: res.status }).toEqual({ q, status: 400 });
    }
  });

  it('deletes objects by repeated key params and answers the ones that existed', async () => {
    await putObjects(c, ['rm/a', 'rm/b', 'rm/c d', 'rm/keep']);
    const res = await req(
      'DELETE',
      `/v1/buckets/objects-bkt/objects?key=rm/a&key=${encodeURIComponent('rm/c d')}&key=rm/none&key=rm/a`,
    );
    expect(res.status).toBe(200);
    expect({ ...res.body, deleted: [...res.body.deleted].sort() }).toEqual({
      bucket: 'objects-bkt',
      deleted: ['rm/a', 'rm/c d'],
    });
    const one = await req('DELETE', '/v1/buckets/objects-bkt/objects?key=rm/b');
    expect(one.body).toEqual({ bucket: 'objects-bkt', deleted: ['rm/b'] });
    const left = await req('GET', '/v1/buckets/objects-bkt/objects?prefix=rm/');
    expect(left.body.objects.map((o: { key: string }) => o.key)).toEqual(['rm/keep']);
    const s3 = s3Client(c);
    const gone = await sdkError(
      s3.send(new PutObjectCommand({ Bucket: 'other-bucket', Key: 'x', Body: 'x' })),
    );
    expect(gone.code).toBe('AccessDenied');
    s3.destroy();
    const none = await req('DELETE', '/v1/buckets/objects-bkt/objects');
    expect(none.status).toBe(400);
  });
});

describe('CORS rules', () => {
  beforeAll(async () => createBucket(tp, org, 'cors-bkt'));
  const rule = { allowedMethods: ['GET'], allowedOrigins: ['https://a.example'] };

  it('starts empty, stores rules as given and replaces them whole', async () => {
    expect((await req('GET', '/v1/buckets/cors-bkt/cors')).body).toEqual({ rules: [] });
    const rules = [
      {
        id: 'web',
        allowedMethods: ['GET', 'PUT'],
        allowedOrigins: ['https://app.example.com', 'https://*.example.org'],
        allowedHeaders: ['*'],
        exposeHeaders: ['ETag'],
        maxAgeSeconds: 3000,
      },
      rule,
    ];
    const put = await req('PUT', '/v1/buckets/cors-bkt/cors', { rules });
    expect(put.status).toBe(200);
    expect(put.body).toEqual({ rules });
    expect((await req('GET', '/v1/buckets/cors-bkt/cors')).body).toEqual({ rules });
    const replaced = await req('PUT', '/v1/buckets/cors-bkt/cors', { rules: [rule] });
    expect(replaced.body).toEqual({ rules: [rule] });
    const cleared = await req('PUT', '/v1/buckets/cors-bkt/cors', { rules: [] });
    expect(cleared.body).toEqual({ rules: [] });
    expect((await req('GET', '/v1/buckets/cors-bkt/cors')).body).toEqual({ rules: [] });
  });

  it('takes 0 to 100 rules; 101 is 400', async () => {
    const hundred = Array.from({ length: 100 }, () => rule);
    expect((await req('PUT', '/v1/buckets/cors-bkt/cors', { rules: hundred })).status).toBe(200);
    const res = await req('PUT', '/v1/buckets/cors-bkt/cors', { rules: [...hundred, rule] });
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('bad-request');
    expect(res.body.issues.map((i: { path: string }) => i.path)).toEqual(['rules']);
    expect((await req('GET', '/v1/buckets/cors-bkt/cors')).body.rules).toHaveLength(100);
  });

  it('warns about a rule without origins and an origin without a scheme', async () => {
    const res = await req('PUT', '/v1/buckets/cors-bkt/cors', {
      rules: [
        { allowedMethods: ['GET'], allowedOrigins: [] },
        { allowedMethods: ['PUT'], allowedOrigins: ['app.example.com'] },
        rule,
      ],
    });
    expect(res.status).toBe(200);
    expect(res.body.warnings).toHaveLength(2);
    expect(res.body.warnings[0]).toMatch(/rule 1.*origin/);
    expect(res.body.warnings[1]).toMatch(/rule 2.*app\.example\.com.*scheme/);
    const got = await req('GET', '/v1/buckets/cors-bkt/cors');
    expect(got.body.warnings).toEqual(res.body.warnings);
    expect(got.body.rules).toHaveLength(3);
    const clean = await req('PUT', '/v1/buckets/cors-bkt/cors', { rules: [rule] });
    expect(clean.body.warnings).toBeUndefined();
  });

  it('refuses malformed rules with 400 naming the field', async () => {
    for (const [body, field] of [
      [
        { rules: [{ allowedMethods: ['PATCH'], allowedOrigins: ['*'] }] },
        'rules.0.allowedMethods.0',
      ],
      [{ rules: [{ allowedOrigins: ['*'] }] }, 'rules.0.allowedMethods'],
      [{ rules: [{ ...rule, maxAgeSeconds: -1 }] }, 'rules.0.maxAgeSeconds'],
      [{ rules: [{ ...rule, nope: true }] }, 'rules.0.nope'],
      [{}, 'rules'],
    ] as const) {
      const res = await req('PUT', '/v1/buckets/cors-bkt/cors', body);
      expect(res.status).toBe(400);
      expect(res.body.issues.map((i: { path: string }) => i.path)).toContain(field);
    }
    expect((await req('PUT', '/v1/buckets/no-such-bkt/cors', { rules: [] })).status).toBe(404);
  });
});

describe('credentials', () => {
  beforeAll(async () => createBucket(tp, org, 'cred-bkt'));

  it('mints a key shown once, lists it without the secret, and revokes it at the gateway', async () => {
    const res = await req('POST', '/v1/buckets/cred-bkt/credentials');
    expect(res.status).toBe(201);
    expect(res.body).toEqual({
      accessKeyId: expect.stringMatching(/^PIER[A-Z2-7]{16}$/),
      secretAccessKey: expect.any(String),
      bucket: 'cred-bkt',
      purpose: 'person',
      endpoint: `${tp.url}/s3`,
      region: expect.any(String),
      forcePathStyle: true,
      createdAt: expect.any(String),
    });
    const c: Credentials = { ...res.body };
    const s3: S3Client = s3Client(c);
    await s3.send(new PutObjectCommand({ Bucket: 'cred-bkt', Key: 'k', Body: 'v' }));
    const list = await req('GET', '/v1/buckets/cred-bkt/credentials');
    expect(list.status).toBe(200);
    expect(list.body).toEqual([
      {
        accessKeyId: c.accessKeyId,
        bucket: 'cred-bkt',
        purpose: 'person',
        createdAt: res.body.createdAt,
      },
    ]);
    expect(JSON.stringify(list.body)).not.toContain(c.secretAccessKey);
    const del = await req('DELETE', `/v1/buckets/cred-bkt/credentials/${c.accessKeyId}`);
    expect(del.status).toBe(204);
    const e = await sdkError(
      s3.send(new PutObjectCommand({ Bucket: 'cred-bkt', Key: 'k', Body: 'v' })),
    );
    expect(e).toMatchObject({ code: 'InvalidAccessKeyId', status: 403 });
    expect((await req('GET', '/v1/buckets/cred-bkt/credentials')).body).toEqual([]);
    const again = await req('DELETE', `/v1/buckets/cred-bkt/credentials/${c.accessKeyId}`);
    expect(again.status).toBe(404);
    s3.destroy();
  });

  it("cannot revoke another bucket's or organization's key", async () => {
    const mine = await credentialsFor(tp, org, 'cred-bkt');
    await createBucket(tp, org, 'cred-bkt2');
    const wrongBucket = await req(
      'DELETE',
      `/v1/buckets/cred-bkt2/credentials/${mine.accessKeyId}`,
    );
    expect(wrongBucket.status).toBe(404);
    const wrongOrg = await req(
      'DELETE',
      `/v1/buckets/cred-bkt/credentials/${mine.accessKeyId}`,
      undefined,
      other.token,
    );
    expect(wrongOrg.status).toBe(404);
    const s3 = s3Client(mine);
    await s3.send(new PutObjectCommand({ Bucket: 'cred-bkt', Key: 'still', Body: 'works' }));
    s3.destroy();
  });
});

describe('who may call', () => {
  beforeAll(async () => createBucket(tp, org, 'auth-bkt'));

  const token = async (body: Record<string, unknown>) => {
    const res = await req('POST', '/v1/tokens', { name: 'limited', ...body });
    expect(res.status).toBe(201);
    return res.body.token as string;
  };

  it('lets a read key read but not create, delete, presign or mint', async () => {
    const read = await token({ scopes: ['read'] });
    expect((await req('GET', '/v1/buckets', undefined, read)).status).toBe(200);
    expect((await req('GET', '/v1/buckets/auth-bkt/objects', undefined, read)).status).toBe(200);
    expect((await req('GET', '/v1/buckets/auth-bkt/cors', undefined, read)).status).toBe(200);
    for (const [method, p, body] of [
      ['POST', '/v1/buckets', { name: 'by-read-key' }],
      ['DELETE', '/v1/buckets/auth-bkt', undefined],
      ['POST', '/v1/buckets/auth-bkt/presign', { key: 'k' }],
      ['PUT', '/v1/buckets/auth-bkt/cors', { rules: [] }],
      ['DELETE', '/v1/buckets/auth-bkt/objects?key=k', undefined],
      ['POST', '/v1/buckets/auth-bkt/credentials', undefined],
    ] as const) {
      const res = await req(method, p, body, read);
      expect({ p, method, status: res.status, code: res.body.code }).toEqual({
        p,
        method,
        status: 403,
        code: 'token-scope',
      });
    }
  });

  it('applies the agent classes of the spec to presign, objects and credentials', async () => {
    const prod = await token({ agent: { class: 'production' } });
    const presign = await req('POST', '/v1/buckets/auth-bkt/presign', { key: 'k' }, prod);
    expect(presign.status).toBe(403);
    expect(presign.body.code).toBe('agent-token-production-readonly');
    const objects = await req('GET', '/v1/buckets/auth-bkt/objects', undefined, prod);
    expect(objects.status).toBe(403);
    expect(objects.body.code).toBe('agent-token-production-data');
    expect((await req('GET', '/v1/buckets', undefined, prod)).status).toBe(200);
    const sandbox = await token({ agent: { class: 'sandbox' } });
    expect((await req('POST', '/v1/buckets/auth-bkt/presign', { key: 'k' }, sandbox)).status).toBe(
      200,
    );
    const mint = await req('POST', '/v1/buckets/auth-bkt/credentials', undefined, sandbox);
    expect(mint.status).toBe(403);
    expect(mint.body.code).toBe('agent-token-credential');
  });
});
