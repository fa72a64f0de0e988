import {
  S3Client,
  PutObjectCommand,
  GetObjectCommand,
  ListObjectsV2Command,
  DeleteObjectCommand,
  HeadObjectCommand,
} from '@aws-sdk/client-s3';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.js';

let tp: TestPlatform;
beforeAll(async () => {
  tp = await startTestPlatform();
});
afterAll(async () => tp?.close());

it('smoke', async () => {
  const org = await tp.createOrg();
  const b = await tp.request('POST', '/v1/buckets', {
    token: org.token,
    body: { name: 'smoke-bkt' },
  });
  expect(b.status).toBe(201);
  const cred = await tp.request('POST', '/v1/buckets/smoke-bkt/credentials', { token: org.token });
  expect(cred.status).toBe(201);
  const s3 = new S3Client({
    endpoint: cred.body.endpoint,
    region: cred.body.region,
    forcePathStyle: true,
    credentials: { accessKeyId: cred.body.accessKeyId, secretAccessKey: cred.body.secretAccessKey },
  });
  const put = await s3.send(
    new PutObjectCommand({
      Bucket: 'smoke-bkt',
      Key: 'a/b c.txt',
      Body: 'hello world',
      ContentType: 'text/plain',
    }),
  );
  expect(put.ETag).toBe('"5eb63bbbe01eeed093cb22bb8f5acdc3"');
  const got = await s3.send(new GetObjectCommand({ Bucket: 'smoke-bkt', Key: 'a/b c.txt' }));
  expect(await got.Body!.transformToString()).toBe('hello world');
  const head = await s3.send(new HeadObjectCommand({ Bucket: 'smoke-bkt', Key: 'a/b c.txt' }));
  expect(head.ContentLength).toBe(11);
  const list = await s3.send(new ListObjectsV2Command({ Bucket: 'smoke-bkt', Delimiter: '/' }));
  expect(list.CommonPrefixes?.[0]?.Prefix).toBe('a/');
  await s3.send(new DeleteObjectCommand({ Bucket: 'smoke-bkt', Key: 'a/b c.txt' }));
  const pre = await tp.request('POST', '/v1/buckets/smoke-bkt/presign', {
    token: org.token,
    body: { op: 'put', key: 'x.txt', contentType: 'text/plain' },
  });
  expect(pre.status).toBe(200);
  const r = await fetch(pre.body.url, {
    method: 'PUT',
    headers: pre.body.requiredHeaders,
    body: 'via presign',
  });
  expect(r.status).toBe(200);
  const g = await tp.request('POST', '/v1/buckets/smoke-bkt/presign', {
    token: org.token,
    body: { key: 'x.txt' },
  });
  const r2 = await fetch(g.body.url);
  expect(await r2.text()).toBe('via presign');
});
