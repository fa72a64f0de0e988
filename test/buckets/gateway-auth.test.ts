/**
 * Who gets in at the S3 gateway: signatures (tampered, wrong key, expired, skewed, missing
 * headers), bucket scoping across buckets and organizations, path traversal, and CORS
 * for browser requests.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import {
  CopyObjectCommand,
  CreateMultipartUploadCommand,
  DeleteObjectsCommand,
  GetObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  UploadPartCopyCommand,
  type S3Client,
} from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveConfig } from '../../src/config.js';
import { startPlatform, type Platform } from '../../src/platform.js';
import { startTestPlatform, type TestOrg, type TestPlatform } from '../helpers/platform.js';
import {
  createBucket,
  credentialsFor,
  expectS3Error,
  s3Client,
  sdkError,
  signedFetch,
  type Credentials,
} from './helpers.js';

let tp: TestPlatform;
let orgA: TestOrg;
let orgB: TestOrg;
let credA: Credentials;
let credA2: Credentials;
let credB: Credentials;
let s3A: S3Client;

/** Every log line of the platform under test, at trace level (see "what the logs keep"). */
const logs: string[] = [];
const sink = new Writable({
  write(chunk, _enc, done) {
    logs.push(String(chunk));
    done();
  },
});

beforeAll(async () => {
  tp = await startTestPlatform({ logLevel: 'trace' }, { logger: pino({ level: 'trace' }, sink) });
  orgA = await tp.createOrg();
  orgB = await tp.createOrg();
  await createBucket(tp, orgA, 'auth-a');
  await createBucket(tp, orgA, 'auth-a2');
  await createBucket(tp, orgB, 'auth-b');
  credA = await credentialsFor(tp, orgA, 'auth-a');
  credA2 = await credentialsFor(tp, orgA, 'auth-a2');
  credB = await credentialsFor(tp, orgB, 'auth-b');
  s3A = s3Client(credA);
  await s3A.send(new PutObjectCommand({ Bucket: 'auth-a', Key: 'secret.txt', Body: 'top secret' }));
  await s3Client(credA2).send(
    new PutObjectCommand({ Bucket: 'auth-a2', Key: 'other.txt', Body: 'other bucket' }),
  );
});
afterAll(async () => {
  s3A?.destroy();
  await tp?.close();
});

async function presign(
  org: TestOrg,
  bucket: string,
  body: Record<string, unknown>,
): Promise<{ url: string; requiredHeaders: Record<string, string> }> {
  const res = await tp.request('POST', `/v1/buckets/${bucket}/presign`, { token: org.token, body });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body;
}

/** The URL with one query parameter replaced. */
function withParam(url: string, name: string, value: string): string {
  const u = new URL(url);
  u.searchParams.set(name, value);
  return u.toString();
}

describe('signatures', () => {
  it('accepts a presigned GET from the spec route with plain fetch', async () => {
    const { url } = await presign(orgA, 'auth-a', { key: 'secret.txt' });
    const res = await fetch(url);
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('top secret');
  });

  it('refuses a tampered signature with SignatureDoesNotMatch', async () => {
    const { url } = await presign(orgA, 'auth-a', { key: 'secret.txt' });
    const sig = new URL(url).searchParams.get('X-Amz-Signature')!;
    const flipped = sig.slice(0, -1) + (sig.endsWith('0') ? '1' : '0');
    const e = await expectS3Error(
      fetch(withParam(url, 'X-Amz-Signature', flipped)),
      403,
      'SignatureDoesNotMatch',
    );
    expect(e.text).not.toContain('top secret');
    // The same signature for another key of the bucket.
    const moved = url.replace('/secret.txt?', '/other.txt?');
    await expectS3Error(fetch(moved), 403, 'SignatureDoesNotMatch');
    // A longer lifetime than was signed.
    await expectS3Error(
      fetch(withParam(url, 'X-Amz-Expires', '604800')),
      403,
      'SignatureDoesNotMatch',
    );
    // The header form, with its signature altered, or a signed header changed in flight.
    const ok = await signedFetch(credA, { method: 'GET', path: '/auth-a/secret.txt' });
    expect(await ok.text()).toBe('top secret');
    await expectS3Error(
      signedFetch(credA, {
        method: 'GET',
        path: '/auth-a/secret.txt',
        mutate: (h) => {
          h.authorization = h.authorization!.replace(/Signature=[0-9a-f]{4}/, 'Signature=0000');
        },
      }),
      403,
      'SignatureDoesNotMatch',
    );
    await expectS3Error(
      signedFetch(credA, {
        method: 'GET',
        path: '/auth-a/secret.txt',
        headers: { range: 'bytes=0-3' },
        mutate: (h) => {
          h.range = 'bytes=0-9';
        },
      }),
      403,
      'SignatureDoesNotMatch',
    );
  });

  it('refuses an unknown access key with InvalidAccessKeyId and a wrong secret with SignatureDoesNotMatch', async () => {
    const unknown = await sdkError(
      s3Client({ ...credA, accessKeyId: 'PIERAAAAAAAAAAAAAAAA' }).send(
        new GetObjectCommand({ Bucket: 'auth-a', Key: 'secret.txt' }),
      ),
    );
    expect(unknown).toMatchObject({ code: 'InvalidAccessKeyId', status: 403 });
    const wrongSecret = await sdkError(
      s3Client({ ...credA, secretAccessKey: credB.secretAccessKey }).send(
        new GetObjectCommand({ Bucket: 'auth-a', Key: 'secret.txt' }),
      ),
    );
    expect(wrongSecret).toMatchObject({ code: 'SignatureDoesNotMatch', status: 403 });
    const e = await expectS3Error(
      signedFetch(
        { ...credA, accessKeyId: 'AKIAIOSFODNN7EXAMPLE' },
        { method: 'GET', path: '/auth-a/secret.txt' },
      ),
      403,
      'InvalidAccessKeyId',
    );
    expect(e.text).toContain('<AWSAccessKeyId>AKIAIOSFODNN7EXAMPLE</AWSAccessKeyId>');
  });

  it('refuses an expired presigned URL with AccessDenied', async () => {
    const { url } = await presign(orgA, 'auth-a', { key: 'secret.txt', expiresInS: 1 });
    await new Promise((r) => setTimeout(r, 2100));
    const e = await expectS3Error(fetch(url), 403, 'AccessDenied');
    expect(e.message).toBe('Request has expired');
    // One minted by the SDK's presigner an hour ago for a minute.
    const old = await getSignedUrl(
      s3A,
      new GetObjectCommand({ Bucket: 'auth-a', Key: 'secret.txt' }),
      {
        expiresIn: 60,
        signingDate: new Date(Date.now() - 3600_000),
      },
    );
    await expectS3Error(fetch(old), 403, 'AccessDenied');
    // And a fresh one from the same presigner works.
    const fresh = await getSignedUrl(
      s3A,
      new GetObjectCommand({ Bucket: 'auth-a', Key: 'secret.txt' }),
      { expiresIn: 60 },
    );
    const ok = await fetch(fresh);
    expect(await ok.text()).toBe('top secret');
  });

  it('refuses a presigned PUT sent without (or with another) required Content-Type', async () => {
    const p = await presign(orgA, 'auth-a', {
      op: 'put',
      key: 'upload.png',
      contentType: 'image/png',
    });
    expect(p.requiredHeaders).toEqual({ 'content-type': 'image/png' });
    await expectS3Error(fetch(p.url, { method: 'PUT', body: 'x' }), 403, 'SignatureDoesNotMatch');
    await expectS3Error(
      fetch(p.url, { method: 'PUT', body: 'x', headers: { 'content-type': 'image/jpeg' } }),
      403,
      'SignatureDoesNotMatch',
    );
    const nothing = await sdkError(
      s3A.send(new GetObjectCommand({ Bucket: 'auth-a', Key: 'upload.png' })),
    );
    expect(nothing.code).toBe('NoSuchKey');
    const ok = await fetch(p.url, { method: 'PUT', body: 'png bytes', headers: p.requiredHeaders });
    expect(ok.status).toBe(200);
    const got = await s3A.send(new GetObjectCommand({ Bucket: 'auth-a', Key: 'upload.png' }));
    expect(got.ContentType).toBe('image/png');
    expect(await got.Body!.transformToString()).toBe('png bytes');
  });

  it('refuses an unsigned x-amz-* header added to a presigned URL', async () => {
    const p = await presign(orgA, 'auth-a', { op: 'put', key: 'meta.txt' });
    const e = await expectS3Error(
      fetch(p.url, { method: 'PUT', body: 'x', headers: { 'x-amz-meta-evil': '1' } }),
      403,
      'AccessDenied',
    );
    expect(e.text).toContain('<HeadersNotSigned>x-amz-meta-evil</HeadersNotSigned>');
  });

  it('refuses a header-signed request without x-amz-content-sha256 (a required header)', async () => {
    // Signed with the header, then sent without it: S3 names the missing header.
    const signed = await signedFetch(credA, {
      method: 'GET',
      path: '/auth-a/secret.txt',
      mutate: (h) => delete h['x-amz-content-sha256'],
    });
    const e = await expectS3Error(signed, 400, 'InvalidRequest');
    expect(e.message).toContain('x-amz-content-sha256');
    const noDate = await signedFetch(credA, {
      method: 'GET',
      path: '/auth-a/secret.txt',
      mutate: (h) => delete h['x-amz-date'],
    });
    await expectS3Error(noDate, 403, 'AccessDenied');
  });

  it('refuses an anonymous request with AccessDenied', async () => {
    await expectS3Error(fetch(`${tp.url}/s3/auth-a/secret.txt`), 403, 'AccessDenied');
    await expectS3Error(fetch(`${tp.url}/s3/auth-a`), 403, 'AccessDenied');
  });

  it('refuses a request signed 20 minutes ago with RequestTimeTooSkewed', async () => {
    const e = await expectS3Error(
      signedFetch(credA, {
        method: 'GET',
        path: '/auth-a/secret.txt',
        signingDate: new Date(Date.now() - 20 * 60_000),
      }),
      403,
      'RequestTimeTooSkewed',
    );
    expect(e.text).toContain('<MaxAllowedSkewMilliseconds>900000</MaxAllowedSkewMilliseconds>');
    // The SDK with its clock 20 minutes behind (no retries, which would correct the skew).
    const skewed = s3Client(credA, { systemClockOffset: -20 * 60_000, maxAttempts: 1 });
    const sdk = await sdkError(
      skewed.send(new GetObjectCommand({ Bucket: 'auth-a', Key: 'secret.txt' })),
    );
    expect(sdk).toMatchObject({ code: 'RequestTimeTooSkewed', status: 403 });
    // Within 15 minutes is fine.
    const ok = await signedFetch(credA, {
      method: 'GET',
      path: '/auth-a/secret.txt',
      signingDate: new Date(Date.now() - 10 * 60_000),
    });
    expect(ok.status).toBe(200);
    await ok.arrayBuffer();
  });
});

describe('bucket scoping', () => {
  it("refuses another organization's key on a bucket with AccessDenied, not revealing it", async () => {
    const s3B = s3Client(credB);
    for (const send of [
      () => s3B.send(new GetObjectCommand({ Bucket: 'auth-a', Key: 'secret.txt' })),
      () => s3B.send(new ListObjectsV2Command({ Bucket: 'auth-a' })),
      () => s3B.send(new PutObjectCommand({ Bucket: 'auth-a', Key: 'x', Body: 'x' })),
      () =>
        s3B.send(
          new DeleteObjectsCommand({
            Bucket: 'auth-a',
            Delete: { Objects: [{ Key: 'secret.txt' }] },
          }),
        ),
      // A bucket that does not exist answers the same.
      () => s3B.send(new GetObjectCommand({ Bucket: 'no-such-bucket', Key: 'secret.txt' })),
    ]) {
      expect(await sdkError(send())).toMatchObject({ code: 'AccessDenied', status: 403 });
    }
    // The object is still there.
    const got = await s3A.send(new GetObjectCommand({ Bucket: 'auth-a', Key: 'secret.txt' }));
    expect(await got.Body!.transformToString()).toBe('top secret');
    // And through the API the bucket is simply not found for the other organization.
    for (const [method, p, body] of [
      ['GET', '/v1/buckets/auth-a', undefined],
      ['POST', '/v1/buckets/auth-a/presign', { key: 'secret.txt' }],
      ['GET', '/v1/buckets/auth-a/objects', undefined],
      ['DELETE', '/v1/buckets/auth-a/objects?key=secret.txt', undefined],
      ['POST', '/v1/buckets/auth-a/credentials', undefined],
      ['GET', '/v1/buckets/auth-a/cors', undefined],
      ['DELETE', '/v1/buckets/auth-a?force=true', undefined],
    ] as const) {
      const res = await tp.request(method, p, { token: orgB.token, body });
      expect({ p, status: res.status, code: res.body?.code }).toEqual({
        p,
        status: 404,
        code: 'not-found',
      });
    }
  });

  it("refuses a bucket's key on another bucket of the same organization", async () => {
    for (const send of [
      () => s3A.send(new GetObjectCommand({ Bucket: 'auth-a2', Key: 'other.txt' })),
      () => s3A.send(new ListObjectsV2Command({ Bucket: 'auth-a2' })),
      () => s3A.send(new PutObjectCommand({ Bucket: 'auth-a2', Key: 'x', Body: 'x' })),
      // Copying out of the other bucket into its own.
      () =>
        s3A.send(
          new CopyObjectCommand({
            Bucket: 'auth-a',
            Key: 'stolen.txt',
            CopySource: 'auth-a2/other.txt',
          }),
        ),
      // Copying a part out of the other bucket.
      async () => {
        const { UploadId } = await s3A.send(
          new CreateMultipartUploadCommand({ Bucket: 'auth-a', Key: 'stolen-part' }),
        );
        return s3A.send(
          new UploadPartCopyCommand({
            Bucket: 'auth-a',
            Key: 'stolen-part',
            UploadId,
            PartNumber: 1,
            CopySource: 'auth-a2/other.txt',
          }),
        );
      },
    ]) {
      expect(await sdkError(send())).toMatchObject({ code: 'AccessDenied', status: 403 });
    }
    const list = await s3A.send(new ListObjectsV2Command({ Bucket: 'auth-a' }));
    expect(list.Contents?.map((o) => o.Key)).not.toContain('stolen.txt');
  });
});

describe('path traversal', () => {
  const keys = ['../escape.txt', '../auth-a2/other.txt', 'a/../../b.txt', '..', './x', '/lead'];

  it('keeps keys with ../ as plain keys inside the bucket', async () => {
    for (const key of keys) {
      await s3A.send(new PutObjectCommand({ Bucket: 'auth-a', Key: key, Body: `data of ${key}` }));
      const got = await s3A.send(new GetObjectCommand({ Bucket: 'auth-a', Key: key }));
      expect(await got.Body!.transformToString()).toBe(`data of ${key}`);
    }
    const list = await s3A.send(new ListObjectsV2Command({ Bucket: 'auth-a' }));
    expect(list.Contents?.map((o) => o.Key)).toEqual(expect.arrayContaining(keys));
    // The other bucket is untouched.
    const s3A2 = s3Client(credA2);
    const other = await s3A2.send(new GetObjectCommand({ Bucket: 'auth-a2', Key: 'other.txt' }));
    expect(await other.Body!.transformToString()).toBe('other bucket');
    const listed = await s3A2.send(new ListObjectsV2Command({ Bucket: 'auth-a2' }));
    expect(listed.Contents?.map((o) => o.Key)).toEqual(['other.txt']);
    // No key ever became a file name: every file under the data dir is pier's own.
    const names = await allFiles(tp.dataDir);
    expect(names.filter((n) => /escape|b\.txt|lead|other\.txt/.test(n))).toEqual([]);
  });

  it('resolves nothing in a raw request line with .. or %2e%2e segments', async () => {
    // Signed exactly as sent: the gateway reads bucket auth-a and the literal key, which the
    // test above stored there; the object of auth-a2 is never what comes back.
    const res = await signedFetch(credA, { method: 'GET', path: '/auth-a/../auth-a2/other.txt' });
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('data of ../auth-a2/other.txt');
    const enc = await signedFetch(credA, {
      method: 'GET',
      path: '/auth-a/..%2Fauth-a2%2Fother.txt',
      sendPath: '/auth-a/%2e%2e%2fauth-a2%2fother.txt',
    });
    expect(await enc.text()).toBe('data of ../auth-a2/other.txt');
    const up = await signedFetch(credA, { method: 'GET', path: '/auth-a/../../auth-a2/other.txt' });
    const e = await expectS3Error(up, 404, 'NoSuchKey');
    expect(e.text).toContain('<Key>../../auth-a2/other.txt</Key>');
    // A traversal in the bucket part names another bucket, which the key cannot reach.
    const bucketPart = await signedFetch(credA, { method: 'GET', path: '/../auth-a2/other.txt' });
    expect(bucketPart.status).toBe(403);
    await bucketPart.arrayBuffer();
    const stored = await signedFetch(credA, { method: 'GET', path: '/auth-a/../escape.txt' });
    expect(stored.status).toBe(200);
    expect(await stored.text()).toBe('data of ../escape.txt');
  });
});

async function allFiles(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const p = path.join(dir, entry.name);
    out.push(entry.name);
    if (entry.isDirectory()) out.push(...(await allFiles(p)));
  }
  return out;
}

describe('CORS at the gateway', () => {
  const origin = 'https://app.example.com';
  beforeAll(async () => {
    await createBucket(tp, orgA, 'auth-cors');
    const res = await tp.request('PUT', '/v1/buckets/auth-cors/cors', {
      token: orgA.token,
      body: {
        rules: [
          {
            allowedMethods: ['GET', 'PUT'],
            allowedOrigins: [origin, 'https://*.example.org'],
            allowedHeaders: ['content-type', 'x-amz-*'],
            exposeHeaders: ['etag'],
            maxAgeSeconds: 600,
          },
        ],
      },
    });
    expect(res.status).toBe(200);
    const c = await credentialsFor(tp, orgA, 'auth-cors');
    await s3Client(c).send(
      new PutObjectCommand({ Bucket: 'auth-cors', Key: 'pic.txt', Body: 'picture' }),
    );
  });

  const preflight = (headers: Record<string, string>, key = 'pic.txt') =>
    fetch(`${tp.url}/s3/auth-cors/${key}`, { method: 'OPTIONS', headers });

  it('answers a matching preflight with 200 and the allowed origin', async () => {
    const res = await preflight({
      origin,
      'access-control-request-method': 'PUT',
      'access-control-request-headers': 'Content-Type, X-Amz-Date',
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('access-control-allow-origin')).toBe(origin);
    expect(res.headers.get('access-control-allow-methods')).toContain('PUT');
    expect(res.headers.get('access-control-allow-headers')).toBe('content-type, x-amz-date');
    expect(res.headers.get('access-control-max-age')).toBe('600');
    const wild = await preflight({
      origin: 'https://shop.example.org',
      'access-control-request-method': 'GET',
    });
    expect(wild.status).toBe(200);
    expect(wild.headers.get('access-control-allow-origin')).toBe('https://shop.example.org');
  });

  it('refuses a preflight no rule matches with 403', async () => {
    const refused: Record<string, string>[] = [
      { origin: 'https://evil.example.net', 'access-control-request-method': 'GET' },
      { origin, 'access-control-request-method': 'DELETE' },
      {
        origin,
        'access-control-request-method': 'PUT',
        'access-control-request-headers': 'x-other',
      },
    ];
    for (const headers of refused) {
      const res = await preflight(headers);
      const e = await expectS3Error(res, 403, 'AccessDenied');
      expect(e.headers.get('access-control-allow-origin')).toBeNull();
    }
    // Another bucket without rules refuses every preflight.
    const res = await fetch(`${tp.url}/s3/auth-a/secret.txt`, {
      method: 'OPTIONS',
      headers: { origin, 'access-control-request-method': 'GET' },
    });
    expect(res.status).toBe(403);
    await res.arrayBuffer();
    // A preflight without Origin is a bad request.
    const bad = await preflight({ 'access-control-request-method': 'GET' });
    expect(bad.status).toBeGreaterThanOrEqual(400);
    await bad.arrayBuffer();
  });

  it('adds access-control-allow-origin to an actual GET from an allowed origin', async () => {
    const { url } = await presign(orgA, 'auth-cors', { key: 'pic.txt' });
    const res = await fetch(url, { headers: { origin } });
    expect(res.status).toBe(200);
    expect(res.headers.get('access-control-allow-origin')).toBe(origin);
    expect(res.headers.get('access-control-expose-headers')).toBe('etag');
    expect(await res.text()).toBe('picture');
    const other = await fetch(url, { headers: { origin: 'https://evil.example.net' } });
    expect(other.status).toBe(200);
    expect(other.headers.get('access-control-allow-origin')).toBeNull();
    await other.arrayBuffer();
  });

  describe('changes of rules', () => {
    // A second replica on the same database, as behind a balancer.
    let replica: Platform;
    let replicaDir: string;
    beforeAll(async () => {
      await createBucket(tp, orgA, 'auth-cors-live');
      replicaDir = await mkdtemp(path.join(os.tmpdir(), 'pier-replica-'));
      replica = await startPlatform(
        resolveConfig({
          listen: '127.0.0.1:0',
          servicesPort: 0, // not the default 8443: test files run side by side
          sshListen: '127.0.0.1:0',
          dataDir: replicaDir,
          databaseUrl: tp.db.url,
          logLevel: 'silent',
          operatorToken: tp.operatorToken,
        }),
      );
    });
    afterAll(async () => {
      await replica?.close();
      if (replicaDir) await rm(replicaDir, { recursive: true, force: true });
    });

    const ask = async (base: string) => {
      const res = await fetch(`${base}/s3/auth-cors-live/pic.txt`, {
        method: 'OPTIONS',
        headers: { origin, 'access-control-request-method': 'GET' },
      });
      await res.arrayBuffer();
      return res.status;
    };
    const putRules = async (rules: unknown[]) => {
      const res = await tp.request('PUT', '/v1/buckets/auth-cors-live/cors', {
        token: orgA.token,
        body: { rules },
      });
      expect(res.status).toBe(200);
    };
    /** The replica's answer once it is `want`, asked again for up to a second. */
    const onReplica = async (want: number) => {
      let status = await ask(replica.url);
      for (let i = 0; i < 100 && status !== want; i++) {
        await new Promise((r) => setTimeout(r, 10));
        status = await ask(replica.url);
      }
      return status;
    };

    it('apply at once on the replica that made them, and within a second on the others', async () => {
      // Both replicas have read (and cached) the bucket without rules.
      expect(await ask(tp.url)).toBe(403);
      expect(await ask(replica.url)).toBe(403);
      await putRules([{ allowedMethods: ['GET'], allowedOrigins: [origin] }]);
      expect(await ask(tp.url)).toBe(200);
      expect(await onReplica(200)).toBe(200);
      // An empty list refuses the very next preflight.
      await putRules([]);
      expect(await ask(tp.url)).toBe(403);
      expect(await onReplica(403)).toBe(403);
    });

    it('forget the rules of a deleted bucket, here and on the others', async () => {
      await putRules([{ allowedMethods: ['GET'], allowedOrigins: [origin] }]);
      expect(await ask(tp.url)).toBe(200);
      expect(await onReplica(200)).toBe(200);
      const del = await tp.request('DELETE', '/v1/buckets/auth-cors-live', { token: orgA.token });
      expect(del.status).toBe(200);
      expect(await ask(tp.url)).toBe(403);
      expect(await onReplica(403)).toBe(403);
    });
  });
});

/** Both headers that keep a stored object from running script as the API's origin. */
function expectSandboxed(res: Response, what: string): void {
  expect(res.headers.get('x-content-type-options'), what).toBe('nosniff');
  expect(res.headers.get('content-security-policy'), what).toBe('sandbox');
}

describe('objects cannot run script as the API origin', () => {
  const page = '<!doctype html><script>fetch("/v1/apps")</script>';
  beforeAll(async () => {
    await s3A.send(
      new PutObjectCommand({
        Bucket: 'auth-a',
        Key: 'page.html',
        Body: page,
        ContentType: 'text/html',
      }),
    );
  });

  it('sends nosniff and a sandbox policy with signed GET and HEAD', async () => {
    for (const method of ['GET', 'HEAD']) {
      const res = await signedFetch(credA, { method, path: '/auth-a/page.html' });
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toBe('text/html');
      expectSandboxed(res, `signed ${method}`);
      if (method === 'GET') expect(await res.text()).toBe(page);
    }
    const ranged = await signedFetch(credA, {
      method: 'GET',
      path: '/auth-a/page.html',
      headers: { range: 'bytes=0-3' },
    });
    expect(ranged.status).toBe(206);
    expectSandboxed(ranged, 'ranged GET');
  });

  it('sends them with presigned GETs, also when the URL asks for text/html', async () => {
    const { url } = await presign(orgA, 'auth-a', { key: 'page.html' });
    const res = await fetch(url);
    expect(res.status).toBe(200);
    expectSandboxed(res, 'presigned GET');
    const plain = await presign(orgA, 'auth-a', { key: 'secret.txt' });
    const html = await getSignedUrl(
      s3A,
      new GetObjectCommand({
        Bucket: 'auth-a',
        Key: 'secret.txt',
        ResponseContentType: 'text/html',
      }),
      { expiresIn: 60 },
    );
    for (const [what, u] of [
      ['presigned GET of text', plain.url],
      ['presigned GET with response-content-type', html],
    ]) {
      const r = await fetch(u!);
      expect(r.status, what).toBe(200);
      expectSandboxed(r, what!);
    }
  });

  it('sends them with error answers too', async () => {
    const { url } = await presign(orgA, 'auth-a', { key: 'page.html' });
    const answers: [string, Response][] = [
      ['NoSuchKey', await signedFetch(credA, { method: 'GET', path: '/auth-a/missing.html' })],
      ['SignatureDoesNotMatch', await fetch(withParam(url, 'X-Amz-Signature', '0'.repeat(64)))],
      ['AccessDenied (anonymous)', await fetch(`${tp.url}/s3/auth-a/page.html`)],
      [
        'AccessDenied (other bucket)',
        await signedFetch(credA, { method: 'GET', path: '/auth-b/x' }),
      ],
      ['MethodNotAllowed', await fetch(`${tp.url}/s3/auth-a/page.html`, { method: 'PATCH' })],
      ['HEAD NoSuchKey', await signedFetch(credA, { method: 'HEAD', path: '/auth-a/missing' })],
    ];
    for (const [what, res] of answers) {
      expect(res.status, what).toBeGreaterThanOrEqual(400);
      expectSandboxed(res, what);
      await res.arrayBuffer();
    }
  });
});

describe('what the logs keep', () => {
  const text = () => logs.join('');

  it('never the signature, credential or security token of a presigned URL', async () => {
    const get = await presign(orgA, 'auth-a', { key: 'secret.txt' });
    const put = await presign(orgA, 'auth-a', {
      op: 'put',
      key: 'logged.png',
      contentType: 'image/png',
    });
    const sdkGet = await getSignedUrl(
      s3A,
      new GetObjectCommand({ Bucket: 'auth-a', Key: 'secret.txt' }),
      { expiresIn: 60 },
    );
    expect((await fetch(get.url)).status).toBe(200);
    const stored = await fetch(put.url, {
      method: 'PUT',
      body: 'png bytes',
      headers: put.requiredHeaders,
    });
    expect(stored.status).toBe(200);
    expect((await fetch(sdkGet)).status).toBe(200);
    // Refused ones are logged too: a tampered signature, an added session token.
    const token = `FQoG${randomBytes(16).toString('hex')}`;
    const refused = await fetch(withParam(get.url, 'X-Amz-Security-Token', token));
    expect(refused.status).toBe(403);
    await refused.arrayBuffer();
    const tampered = withParam(get.url, 'X-Amz-Signature', randomBytes(32).toString('hex'));
    expect((await fetch(tampered)).status).toBe(403);

    const logged = text();
    // The request lines are there, with the parameters' values replaced.
    expect(logged).toContain('X-Amz-Signature=[redacted]');
    expect(logged).toContain('X-Amz-Credential=[redacted]');
    expect(logged).toContain('X-Amz-Security-Token=[redacted]');
    for (const url of [get.url, put.url, sdkGet, tampered]) {
      const q = new URL(url).searchParams;
      const signature = q.get('X-Amz-Signature')!;
      expect(signature).toMatch(/^[0-9a-f]{64}$/);
      expect(logged).not.toContain(signature);
      const credential = q.get('X-Amz-Credential')!;
      expect(logged).not.toContain(credential);
      expect(logged).not.toContain(encodeURIComponent(credential));
    }
    expect(logged).not.toContain(token);
  });

  it('never a secret value, a password, a bearer token or a token in a query', async () => {
    const value = `s3cr3t-${randomBytes(12).toString('hex')}`;
    const password = `pw-${randomBytes(12).toString('hex')}`;
    const queryToken = `qt-${randomBytes(12).toString('hex')}`;
    expect(
      (await tp.request('POST', '/v1/apps', { token: orgA.token, body: { name: 'logged' } }))
        .status,
    ).toBe(201);
    const put = await tp.request('PUT', '/v1/apps/logged/secrets', {
      token: orgA.token,
      body: { secrets: { API_KEY: value } },
    });
    expect(put.status).toBe(200);
    // A malformed body with the value in it is refused, and still not logged.
    const bad = await tp.request('PUT', '/v1/apps/logged/secrets', {
      token: orgA.token,
      body: { secrets: { 'bad name': value } },
    });
    expect(bad.status).toBe(400);
    const email = `logs-${randomBytes(4).toString('hex')}@example.com`;
    const user = await tp.admin('POST', `/admin/v1/orgs/${orgA.id}/users`, {
      email,
      password,
      role: 'admin',
    });
    expect(user.status).toBe(201);
    const signIn = await tp.request('POST', '/console/api/sign-in', { body: { email, password } });
    expect(signIn.status).toBe(200);
    const wrong = await tp.request('POST', '/console/api/sign-in', {
      body: { email, password: `${password}-wrong` },
    });
    expect(wrong.status).toBe(401);
    const withQuery = await tp.request('GET', `/v1/apps?token=${queryToken}&password=${password}`, {
      token: orgA.token,
    });
    expect(withQuery.status).toBeLessThan(500);

    const logged = text();
    expect(logged).toContain('/v1/apps/logged/secrets');
    expect(logged).toContain('token=[redacted]');
    for (const secret of [value, password, queryToken, orgA.token, tp.operatorToken])
      expect(logged).not.toContain(secret);
    expect(logged).not.toContain(signIn.body.token);
  });
});
