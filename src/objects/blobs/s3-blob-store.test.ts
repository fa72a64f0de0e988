/**
 * The S3 store against a real S3 service, held to the same contract as the filesystem
 * store. It runs only when PIER_TEST_S3_URL names one, as an object store URL (see
 * parseObjectStoreUrl), with PIER_TEST_S3_ACCESS_KEY_ID and PIER_TEST_S3_SECRET_ACCESS_KEY
 * (default: the AWS_* variables). The bucket must exist; each run works under a fresh
 * prefix inside it and removes that prefix at the end.
 */
import { randomUUID } from 'node:crypto';
import {
  DeleteObjectsCommand,
  ListMultipartUploadsCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
} from '@aws-sdk/client-s3';
import { describe, expect, it } from 'vitest';
import { blobStoreContract, bodyOf, type BlobStoreHarness } from './contract.test-helper.js';
import { parseObjectStoreUrl } from './config.js';
import { S3BlobStore } from './s3-blob-store.js';

const url = process.env.PIER_TEST_S3_URL;
const accessKeyId =
  process.env.PIER_TEST_S3_ACCESS_KEY_ID ?? process.env.AWS_ACCESS_KEY_ID ?? 'unset';
const secretAccessKey =
  process.env.PIER_TEST_S3_SECRET_ACCESS_KEY ?? process.env.AWS_SECRET_ACCESS_KEY ?? 'unset';

/** A store under a prefix of its own, and a raw client to look behind its back. */
function makeStore(): { store: S3BlobStore; client: S3Client } {
  const location = parseObjectStoreUrl(url ?? '');
  const prefix = `${location.prefix ?? ''}pier-test-${randomUUID()}/`;
  const store = new S3BlobStore({ ...location, prefix, accessKeyId, secretAccessKey });
  const client = new S3Client({
    endpoint: location.endpoint,
    region: location.region,
    forcePathStyle: location.forcePathStyle,
    credentials: { accessKeyId, secretAccessKey },
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
  });
  return { store, client };
}

async function keysUnder(client: S3Client, bucket: string, prefix: string): Promise<string[]> {
  const keys: string[] = [];
  let token: string | undefined;
  do {
    const page = await client.send(
      new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix, ContinuationToken: token }),
    );
    for (const o of page.Contents ?? []) if (o.Key) keys.push(o.Key);
    token = page.IsTruncated ? page.NextContinuationToken : undefined;
  } while (token);
  return keys;
}

/** Unfinished multipart uploads; 0 where the service cannot list them (some cannot). */
async function uploadsUnder(client: S3Client, bucket: string, prefix: string): Promise<number> {
  try {
    const command = new ListMultipartUploadsCommand({ Bucket: bucket, Prefix: prefix });
    return (await client.send(command)).Uploads?.length ?? 0;
  } catch (err) {
    if ((err as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode === 501) {
      return 0;
    }
    throw err;
  }
}

describe.skipIf(!url)('S3BlobStore', () => {
  blobStoreContract(
    'S3BlobStore',
    async (): Promise<BlobStoreHarness> => {
      const { store, client } = makeStore();
      const { bucket, prefix } = store;
      return {
        store,
        leftovers: async () =>
          (await keysUnder(client, bucket, `${prefix}.tmp/`)).length +
          (await uploadsUnder(client, bucket, prefix)),
        // Up to 4 parts of 8 MiB in flight, plus the SDK's own buffers.
        rssBudget: 160 * 1024 * 1024,
        cleanup: async () => {
          const keys = await keysUnder(client, bucket, prefix);
          for (let i = 0; i < keys.length; i += 1000) {
            const Objects = keys.slice(i, i + 1000).map((Key) => ({ Key }));
            await client.send(new DeleteObjectsCommand({ Bucket: bucket, Delete: { Objects } }));
          }
          client.destroy();
        },
      };
    },
    { bigTimeout: 300_000 },
  );

  it('keeps blobs at <prefix><ns>/<id>, and sweeps stale temp keys only', async () => {
    const { store, client } = makeStore();
    await store.put('ns-layout', 'blob-one', bodyOf(Buffer.from('x')));
    const stale = `${store.prefix}.tmp/${randomUUID()}`;
    await client.send(new PutObjectCommand({ Bucket: store.bucket, Key: stale, Body: 'x' }));
    expect((await keysUnder(client, store.bucket, store.prefix)).sort()).toEqual(
      [`${store.prefix}.tmp/${stale.split('/').pop()}`, `${store.prefix}ns-layout/blob-one`].sort(),
    );
    // A cutoff in the past spares it; one in the future (all is older) removes temp keys only.
    expect(await store.sweepTemp(new Date(Date.now() - 3_600_000))).toBe(0);
    expect(await store.sweepTemp(new Date(Date.now() + 3_600_000))).toBe(1);
    expect(await keysUnder(client, store.bucket, store.prefix)).toEqual([
      `${store.prefix}ns-layout/blob-one`,
    ]);
    await store.deleteNamespace('ns-layout');
    expect(await keysUnder(client, store.bucket, store.prefix)).toEqual([]);
    client.destroy();
  });
});
