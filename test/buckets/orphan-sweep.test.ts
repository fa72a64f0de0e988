/**
 * The orphan sweep (services/buckets/orphan-sweep.ts): blobs that no row names go, blobs of
 * objects and of multipart parts stay, and a blob younger than the grace period stays too.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import {
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  GetObjectCommand,
  PutObjectCommand,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newBlobId } from '../../src/services/buckets/objects.js';
import { sweepOrphanBlobs } from '../../src/services/buckets/orphan-sweep.js';
import { startTestPlatform, type TestOrg, type TestPlatform } from '../helpers/platform.js';
import { createBucket, credentialsFor, s3Client } from './helpers.js';

let tp: TestPlatform;
let org: TestOrg;

beforeAll(async () => {
  tp = await startTestPlatform();
  org = await tp.createOrg();
});
afterAll(async () => tp?.close());

/** Where the file store keeps a blob (fs-blob-store.ts: <root>/<ns>/<2 chars>/<id>). */
function blobFile(bucketId: string, blobId: string): string {
  return path.join(tp.dataDir, 'objects', bucketId, blobId.slice(0, 2), blobId);
}

describe('orphan sweep', () => {
  it('removes blobs no row names, and keeps those of objects and multipart parts', async () => {
    const ctx = tp.platform.ctx;
    await createBucket(tp, org, 'sweep');
    const bucketId = (await tp.request('GET', '/v1/buckets/sweep', { token: org.token })).body
      .id as string;
    const s3 = s3Client(await credentialsFor(tp, org, 'sweep'));
    const Bucket = 'sweep';
    await s3.send(new PutObjectCommand({ Bucket, Key: 'kept', Body: 'kept bytes' }));
    const upload = await s3.send(new CreateMultipartUploadCommand({ Bucket, Key: 'big' }));
    const part = await s3.send(
      new UploadPartCommand({
        Bucket,
        Key: 'big',
        UploadId: upload.UploadId,
        PartNumber: 1,
        Body: 'part bytes',
      }),
    );
    // What a crash between storing a blob and committing its row leaves behind.
    const orphan = newBlobId();
    await ctx.blobs.put(bucketId, orphan, Readable.from([Buffer.from('orphan bytes')]));
    expect(existsSync(blobFile(bucketId, orphan))).toBe(true);

    // Within the grace period nothing is taken for an orphan.
    expect(await sweepOrphanBlobs(ctx)).toBe(0);
    expect(existsSync(blobFile(bucketId, orphan))).toBe(true);

    // A grace period in the past makes every blob old enough.
    expect(await sweepOrphanBlobs(ctx, -60_000)).toBe(1);
    expect(existsSync(blobFile(bucketId, orphan))).toBe(false);
    const kept = await s3.send(new GetObjectCommand({ Bucket, Key: 'kept' }));
    expect(await kept.Body!.transformToString()).toBe('kept bytes');
    await s3.send(
      new CompleteMultipartUploadCommand({
        Bucket,
        Key: 'big',
        UploadId: upload.UploadId,
        MultipartUpload: { Parts: [{ PartNumber: 1, ETag: part.ETag }] },
      }),
    );
    const big = await s3.send(new GetObjectCommand({ Bucket, Key: 'big' }));
    expect(await big.Body!.transformToString()).toBe('part bytes');
  });
});
