import { GetObjectCommand, HeadObjectCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import { createBucket, credentialsFor, s3Client } from './helpers.js';

let tp: TestPlatform;
let s3: ReturnType<typeof s3Client>;
const BUCKET = 'get-options';

beforeAll(async () => {
  tp = await startTestPlatform();
  const org = await tp.createOrg();
  await createBucket(tp, org, BUCKET);
  s3 = s3Client(await credentialsFor(tp, org, BUCKET));
  await s3.send(
    new PutObjectCommand({
      Bucket: BUCKET,
      Key: 'report.csv',
      Body: 'a,b\n1,2\n',
      ContentType: 'text/csv',
    }),
  );
});
afterAll(async () => tp?.close());

describe('GetObject options', () => {
  it('applies response-* overrides, as presigned download links use them', async () => {
    const url = await getSignedUrl(
      s3,
      new GetObjectCommand({
        Bucket: BUCKET,
        Key: 'report.csv',
        ResponseContentDisposition: 'attachment; filename="q3.csv"',
        ResponseContentType: 'application/octet-stream',
        ResponseCacheControl: 'no-store',
      }),
      { expiresIn: 60 },
    );
    const res = await fetch(url);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-disposition')).toBe('attachment; filename="q3.csv"');
    expect(res.headers.get('content-type')).toBe('application/octet-stream');
    expect(res.headers.get('cache-control')).toBe('no-store');
    expect(await res.text()).toBe('a,b\n1,2\n');
  });

  it('answers a ranged HeadObject with 206 and the range length', async () => {
    const head = await s3.send(
      new HeadObjectCommand({ Bucket: BUCKET, Key: 'report.csv', Range: 'bytes=0-2' }),
    );
    expect(head.ContentLength).toBe(3);
    expect(head.ContentRange).toBe('bytes 0-2/8');
    expect(head.ContentType).toBe('text/csv');
  });
});
