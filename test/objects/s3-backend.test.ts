/**
 * A pier whose object bytes live in an S3 service (PIER_OBJECT_STORE_URL): here, the
 * gateway of a second pier. Objects written through the first pier's gateway land as
 * blobs in the upstream bucket, and read back intact.
 */
import { createHash, randomBytes } from 'node:crypto';
import {
  GetObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
} from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.js';

let upstream: TestPlatform;
let pier: TestPlatform;
let upstreamClient: S3Client;

function client(cred: {
  endpoint: string;
  region: string;
  accessKeyId: string;
  secretAccessKey: string;
}): S3Client {
  return new S3Client({
    endpoint: cred.endpoint,
    region: cred.region,
    forcePathStyle: true,
    credentials: { accessKeyId: cred.accessKeyId, secretAccessKey: cred.secretAccessKey },
  });
}

beforeAll(async () => {
  upstream = await startTestPlatform();
  const org = await upstream.createOrg();
  await upstream.request('POST', '/v1/buckets', {
    token: org.token,
    body: { name: 'upstream-blobs' },
  });
  const cred = (
    await upstream.request('POST', '/v1/buckets/upstream-blobs/credentials', { token: org.token })
  ).body;
  upstreamClient = client(cred);
  pier = await startTestPlatform({
    objectStoreUrl: `s3://upstream-blobs/store/?endpoint=${encodeURIComponent(cred.endpoint)}&region=${cred.region}`,
    objectStoreAccessKeyId: cred.accessKeyId,
    objectStoreSecretAccessKey: cred.secretAccessKey,
  });
});
afterAll(async () => {
  await pier?.close();
  await upstream?.close();
});

describe('the S3 backend', () => {
  it('keeps object bytes in the S3 service and serves them back', async () => {
    const org = await pier.createOrg();
    const bucket = (
      await pier.request('POST', '/v1/buckets', { token: org.token, body: { name: 'on-s3' } })
    ).body;
    expect(bucket.backendRef).toBe(`s3:${bucket.id}`);
    const cred = (await pier.request('POST', '/v1/buckets/on-s3/credentials', { token: org.token }))
      .body;
    const s3 = client(cred);
    const body = randomBytes(3 * 1024 * 1024 + 7);
    await s3.send(new PutObjectCommand({ Bucket: 'on-s3', Key: 'data/blob.bin', Body: body }));
    const got = await s3.send(new GetObjectCommand({ Bucket: 'on-s3', Key: 'data/blob.bin' }));
    const back = Buffer.from(await got.Body!.transformToByteArray());
    expect(createHash('sha256').update(back).digest('hex')).toBe(
      createHash('sha256').update(body).digest('hex'),
    );
    const ranged = await s3.send(
      new GetObjectCommand({ Bucket: 'on-s3', Key: 'data/blob.bin', Range: 'bytes=10-19' }),
    );
    expect(Buffer.from(await ranged.Body!.transformToByteArray())).toEqual(body.subarray(10, 20));
    // The bytes are a blob under the bucket's id in the upstream bucket, not under the key.
    const listed = await upstreamClient.send(
      new ListObjectsV2Command({ Bucket: 'upstream-blobs', Prefix: `store/${bucket.id}/` }),
    );
    expect(listed.Contents?.length).toBe(1);
    expect(listed.Contents?.[0]?.Size).toBe(body.length);
    expect(listed.Contents?.[0]?.Key).not.toContain('blob.bin');
  });
});
