/**
 * Bucket attachments: an app gets a key to one bucket and managed S3_* secrets; the key
 * works at the gateway for that bucket only and dies with detach, app deletion and a
 * forced bucket deletion.
 */
import {
  GetObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
} from '@aws-sdk/client-s3';
import { NodeHttpHandler } from '@smithy/node-http-handler';
import { readFile } from 'node:fs/promises';
import https from 'node:https';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { servicesUrl } from '../../src/config.js';
import { refreshAttachmentUrls } from '../../src/services/attachment-urls.js';
import { revealSecrets } from '../../src/services/secrets.js';
import { startTestPlatform, type TestOrg, type TestPlatform } from '../helpers/platform.js';
import { createBucket, credentialsFor, s3Client, sdkError } from './helpers.js';

let tp: TestPlatform;
let org: TestOrg;
let other: TestOrg;
let platformCaPem: string;

beforeAll(async () => {
  tp = await startTestPlatform();
  platformCaPem = await readFile(path.join(tp.dataDir, 'ca.crt'), 'utf8');
  org = await tp.createOrg();
  other = await tp.createOrg();
});
afterAll(async () => tp?.close());

const req = (method: string, p: string, body?: unknown, token = org.token) =>
  tp.request(method, p, { token, body });

const INJECTED = [
  'MEDIA_S3_ACCESS_KEY_ID',
  'MEDIA_S3_BUCKET',
  'MEDIA_S3_ENDPOINT',
  'MEDIA_S3_FORCE_PATH_STYLE',
  'MEDIA_S3_REGION',
  'MEDIA_S3_SECRET_ACCESS_KEY',
];

async function createApp(name: string): Promise<string> {
  const res = await req('POST', '/v1/apps', { name });
  expect(res.status).toBe(201);
  return res.body.id;
}

/** The app's environment as its machines would get it. */
async function envOf(appId: string): Promise<Record<string, string>> {
  const ctx = tp.platform.ctx;
  return revealSecrets(ctx.db, ctx, appId);
}

/**
 * An S3 client configured only from the injected variables, as the app would, trusting
 * the platform CA as a machine does (the endpoint is the services listener, over TLS).
 */
function clientFromEnv(env: Record<string, string>, prefix = 'MEDIA_'): S3Client {
  return new S3Client({
    requestHandler: new NodeHttpHandler({ httpsAgent: new https.Agent({ ca: platformCaPem }) }),
    endpoint: env[`${prefix}S3_ENDPOINT`],
    region: env[`${prefix}S3_REGION`],
    forcePathStyle: env[`${prefix}S3_FORCE_PATH_STYLE`] === 'true',
    credentials: {
      accessKeyId: env[`${prefix}S3_ACCESS_KEY_ID`]!,
      secretAccessKey: env[`${prefix}S3_SECRET_ACCESS_KEY`]!,
    },
    maxAttempts: 1,
  });
}

describe('attach', () => {
  let appId: string;
  beforeAll(async () => {
    appId = await createApp('web');
    await createBucket(tp, org, 'web-media');
    await createBucket(tp, org, 'web-private');
  });

  it('attaches with a prefix and injects the S3_* variables', async () => {
    const res = await req('POST', '/v1/apps/web/attach', { bucket: 'web-media', as: 'MEDIA' });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ appName: 'web', bucketName: 'web-media', injected: INJECTED });
    const env = await envOf(appId);
    expect(env).toMatchObject({
      MEDIA_S3_ENDPOINT: `${servicesUrl(tp.platform.config)}/s3`,
      MEDIA_S3_BUCKET: 'web-media',
      MEDIA_S3_REGION: expect.any(String),
      MEDIA_S3_ACCESS_KEY_ID: expect.stringMatching(/^PIER[A-Z2-7]{16}$/),
      MEDIA_S3_SECRET_ACCESS_KEY: expect.any(String),
      MEDIA_S3_FORCE_PATH_STYLE: 'true',
    });
  });

  it('lists the variables as managed secrets that the secrets routes cannot change', async () => {
    const list = await req('GET', '/v1/apps/web/secrets');
    expect(list.status).toBe(200);
    const managed = list.body.filter((s: { name: string }) => INJECTED.includes(s.name));
    expect(managed).toHaveLength(INJECTED.length);
    for (const s of managed) {
      expect(s).toEqual({
        name: s.name,
        updatedAt: expect.any(String),
        managed: true,
        managedReason: 'attachment',
      });
    }
    expect(JSON.stringify(list.body)).not.toContain('PIER'); // no key id, no value
    const put = await req('PUT', '/v1/apps/web/secrets', {
      secrets: { MEDIA_S3_BUCKET: 'elsewhere' },
    });
    expect(put.status).toBe(409);
    expect(put.body.code).toBe('secret-managed');
    // Nothing else in that request was applied either.
    const mixed = await req('PUT', '/v1/apps/web/secrets', {
      secrets: { UNRELATED: 'x', MEDIA_S3_REGION: 'moon' },
    });
    expect(mixed.status).toBe(409);
    const names = (await req('GET', '/v1/apps/web/secrets')).body.map(
      (s: { name: string }) => s.name,
    );
    expect(names).not.toContain('UNRELATED');
    const del = await req('DELETE', '/v1/apps/web/secrets/MEDIA_S3_SECRET_ACCESS_KEY');
    expect(del.status).toBe(409);
    expect(del.body.code).toBe('secret-managed');
    const env = await envOf(appId);
    expect(env.MEDIA_S3_BUCKET).toBe('web-media');
    expect(env.MEDIA_S3_REGION).not.toBe('moon');
  });

  it('rewrites S3_ENDPOINT at start when the services host or port changed', async () => {
    const config = tp.platform.config;
    const was = { host: config.servicesHost, port: config.servicesPort };
    try {
      Object.assign(config, { servicesHost: 'services.pier.internal', servicesPort: 9443 });
      expect(await refreshAttachmentUrls(tp.platform.ctx)).toBe(1);
      expect((await envOf(appId)).MEDIA_S3_ENDPOINT).toBe('https://services.pier.internal:9443/s3');
      expect(await refreshAttachmentUrls(tp.platform.ctx)).toBe(0); // nothing stale left
    } finally {
      Object.assign(config, { servicesHost: was.host, servicesPort: was.port });
      await refreshAttachmentUrls(tp.platform.ctx);
    }
    expect((await envOf(appId)).MEDIA_S3_ENDPOINT).toBe(`${servicesUrl(config)}/s3`);
  });

  it('lists the attachment in GET /v1/bucket-attachments', async () => {
    const res = await req('GET', '/v1/bucket-attachments');
    expect(res.status).toBe(200);
    expect(res.body).toEqual([{ appName: 'web', bucketName: 'web-media', injected: INJECTED }]);
    const theirs = await req('GET', '/v1/bucket-attachments', undefined, other.token);
    expect(theirs.body).toEqual([]);
  });

  it('gives credentials that work at the gateway for that bucket only', async () => {
    const s3 = clientFromEnv(await envOf(appId));
    await s3.send(new PutObjectCommand({ Bucket: 'web-media', Key: 'logo.png', Body: 'logo' }));
    const got = await s3.send(new GetObjectCommand({ Bucket: 'web-media', Key: 'logo.png' }));
    expect(await got.Body!.transformToString()).toBe('logo');
    for (const send of [
      () => s3.send(new ListObjectsV2Command({ Bucket: 'web-private' })),
      () => s3.send(new PutObjectCommand({ Bucket: 'web-private', Key: 'x', Body: 'x' })),
      () => s3.send(new GetObjectCommand({ Bucket: 'web-private', Key: 'x' })),
    ]) {
      expect(await sdkError(send())).toMatchObject({ code: 'AccessDenied', status: 403 });
    }
    s3.destroy();
  });

  it('refuses a second attachment of the same bucket, clashing names and bad prefixes', async () => {
    const twice = await req('POST', '/v1/apps/web/attach', { bucket: 'web-media', as: 'OTHER' });
    expect(twice.status).toBe(409);
    expect(twice.body.code).toBe('already-attached');
    const clash = await req('POST', '/v1/apps/web/attach', { bucket: 'web-private', as: 'MEDIA' });
    expect(clash.status).toBe(409);
    expect(clash.body.code).toBe('conflict');
    for (const as of ['media', '1X', 'PIER', 'PIER_X', 'A-B', '']) {
      const res = await req('POST', '/v1/apps/web/attach', { bucket: 'web-private', as });
      expect({ as, status: res.status }).toEqual({ as, status: 400 });
    }
    const missingBucket = await req('POST', '/v1/apps/web/attach', { bucket: 'nope-bkt', as: 'X' });
    expect(missingBucket.status).toBe(404);
    await createBucket(tp, other, 'not-yours');
    const foreign = await req('POST', '/v1/apps/web/attach', { bucket: 'not-yours', as: 'X' });
    expect(foreign.status).toBe(404);
    const missingApp = await req('POST', '/v1/apps/nope-app/attach', { bucket: 'web-private' });
    expect(missingApp.status).toBe(404);
    // A second bucket under another prefix is fine, and each key reaches its own bucket.
    const second = await req('POST', '/v1/apps/web/attach', { bucket: 'web-private', as: 'PRIV' });
    expect(second.status).toBe(200);
    const env = await envOf(appId);
    expect(env.PRIV_S3_ACCESS_KEY_ID).not.toBe(env.MEDIA_S3_ACCESS_KEY_ID);
    const priv = clientFromEnv(env, 'PRIV_');
    await priv.send(new PutObjectCommand({ Bucket: 'web-private', Key: 'p', Body: 'p' }));
    const e = await sdkError(
      priv.send(new GetObjectCommand({ Bucket: 'web-media', Key: 'logo.png' })),
    );
    expect(e.code).toBe('AccessDenied');
    priv.destroy();
    expect((await req('GET', '/v1/bucket-attachments')).body).toHaveLength(2);
  });

  it('detaches: the key is refused at the gateway and the secrets are gone', async () => {
    const env = await envOf(appId);
    const s3 = clientFromEnv(env);
    await s3.send(new ListObjectsV2Command({ Bucket: 'web-media' })); // cached at the gateway
    const res = await req('POST', '/v1/apps/web/detach', { bucket: 'web-media' });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ appName: 'web', bucketName: 'web-media', injected: INJECTED });
    const e = await sdkError(s3.send(new ListObjectsV2Command({ Bucket: 'web-media' })));
    expect(e).toMatchObject({ code: 'InvalidAccessKeyId', status: 403 });
    const names = (await req('GET', '/v1/apps/web/secrets')).body.map(
      (s: { name: string }) => s.name,
    );
    for (const n of INJECTED) expect(names).not.toContain(n);
    expect(Object.keys(await envOf(appId)).filter((n) => n.startsWith('MEDIA_'))).toEqual([]);
    expect((await req('GET', '/v1/bucket-attachments')).body).toEqual([
      expect.objectContaining({ appName: 'web', bucketName: 'web-private' }),
    ]);
    const again = await req('POST', '/v1/apps/web/detach', { bucket: 'web-media' });
    expect(again.status).toBe(404);
    expect(again.body.code).toBe('not-attached');
    // The bucket and its objects are untouched, and it can be attached again with a new key.
    const re = await req('POST', '/v1/apps/web/attach', { bucket: 'web-media', as: 'MEDIA' });
    expect(re.status).toBe(200);
    const fresh = await envOf(appId);
    expect(fresh.MEDIA_S3_ACCESS_KEY_ID).not.toBe(env.MEDIA_S3_ACCESS_KEY_ID);
    const s3b = clientFromEnv(fresh);
    const got = await s3b.send(new GetObjectCommand({ Bucket: 'web-media', Key: 'logo.png' }));
    expect(await got.Body!.transformToString()).toBe('logo');
    s3.destroy();
    s3b.destroy();
  });
});

describe('revocation is immediate', () => {
  it('refuses a key on the very next request after detach or revoke, even under load', async () => {
    const appId = await createApp('churn');
    await createBucket(tp, org, 'churn-bkt');
    const creds = await credentialsFor(tp, org, 'churn-bkt');
    // Keep the platform busy with uploads meanwhile, as a real one would be.
    let loading = true;
    const load = (async () => {
      const s3 = s3Client(creds);
      while (loading)
        await s3.send(
          new PutObjectCommand({ Bucket: 'churn-bkt', Key: 'load', Body: Buffer.alloc(4 << 20) }),
        );
      s3.destroy();
    })();
    try {
      for (let i = 0; i < 15; i++) {
        expect((await req('POST', '/v1/apps/churn/attach', { bucket: 'churn-bkt' })).status).toBe(
          200,
        );
        const app = clientFromEnv(await envOf(appId), '');
        await app.send(new ListObjectsV2Command({ Bucket: 'churn-bkt' }));
        expect((await req('POST', '/v1/apps/churn/detach', { bucket: 'churn-bkt' })).status).toBe(
          200,
        );
        const e = await sdkError(app.send(new ListObjectsV2Command({ Bucket: 'churn-bkt' })));
        expect({ i, code: e.code }).toEqual({ i, code: 'InvalidAccessKeyId' });
        app.destroy();
        const person = await credentialsFor(tp, org, 'churn-bkt');
        const s3 = s3Client(person);
        await s3.send(new ListObjectsV2Command({ Bucket: 'churn-bkt' }));
        const del = await req('DELETE', `/v1/buckets/churn-bkt/credentials/${person.accessKeyId}`);
        expect(del.status).toBe(204);
        const e2 = await sdkError(s3.send(new ListObjectsV2Command({ Bucket: 'churn-bkt' })));
        expect({ i, code: e2.code }).toEqual({ i, code: 'InvalidAccessKeyId' });
        s3.destroy();
      }
    } finally {
      loading = false;
      await load;
    }
  });
});

describe('what ends an attachment', () => {
  it('deleting the app revokes its key', async () => {
    const appId = await createApp('doomed');
    await createBucket(tp, org, 'doomed-bkt');
    expect(
      (await req('POST', '/v1/apps/doomed/attach', { bucket: 'doomed-bkt', as: 'S' })).status,
    ).toBe(200);
    const s3 = clientFromEnv(await envOf(appId), 'S_');
    await s3.send(new PutObjectCommand({ Bucket: 'doomed-bkt', Key: 'k', Body: 'v' }));
    expect((await req('DELETE', '/v1/apps/doomed')).status).toBe(204);
    const e = await sdkError(s3.send(new GetObjectCommand({ Bucket: 'doomed-bkt', Key: 'k' })));
    expect(e).toMatchObject({ code: 'InvalidAccessKeyId', status: 403 });
    expect((await req('GET', '/v1/bucket-attachments')).body).not.toContainEqual(
      expect.objectContaining({ bucketName: 'doomed-bkt' }),
    );
    // The bucket stays, with its object.
    const objects = await req('GET', '/v1/buckets/doomed-bkt/objects');
    expect(objects.body.objects.map((o: { key: string }) => o.key)).toEqual(['k']);
    s3.destroy();
  });

  it('deleting an attached bucket needs force; force detaches every app', async () => {
    const a1 = await createApp('att-one');
    const a2 = await createApp('att-two');
    await createBucket(tp, org, 'shared-bkt');
    for (const app of ['att-one', 'att-two'])
      expect((await req('POST', `/v1/apps/${app}/attach`, { bucket: 'shared-bkt' })).status).toBe(
        200,
      );
    // Without `as`, the names have no prefix.
    const env1 = await envOf(a1);
    expect(env1.S3_BUCKET).toBe('shared-bkt');
    const s3 = clientFromEnv(env1, '');
    await s3.send(new ListObjectsV2Command({ Bucket: 'shared-bkt' }));
    const refused = await req('DELETE', '/v1/buckets/shared-bkt');
    expect(refused.status).toBe(409);
    expect(refused.body.code).toBe('bucket-attached');
    const forced = await req('DELETE', '/v1/buckets/shared-bkt?force=true');
    expect(forced.status).toBe(200);
    expect(forced.body).toEqual({
      destroyed: true,
      deletedObjects: 0,
      detached: ['att-one', 'att-two'],
    });
    for (const id of [a1, a2]) {
      expect(Object.keys(await envOf(id)).filter((n) => n.startsWith('S3_'))).toEqual([]);
    }
    for (const app of ['att-one', 'att-two']) {
      const names = (await req('GET', `/v1/apps/${app}/secrets`)).body;
      expect(names).toEqual([]);
    }
    const e = await sdkError(s3.send(new ListObjectsV2Command({ Bucket: 'shared-bkt' })));
    expect(e).toMatchObject({ code: 'InvalidAccessKeyId', status: 403 });
    expect((await req('GET', '/v1/bucket-attachments')).body).not.toContainEqual(
      expect.objectContaining({ bucketName: 'shared-bkt' }),
    );
    s3.destroy();
  });
});
