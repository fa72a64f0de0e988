/** Durable jobs of buckets: deleting the bytes of replaced or deleted objects and buckets. */
import { z } from 'zod';
import { defineJob, exponentialBackoff } from '../../jobs/catalogue.js';
import type { BlobStore } from '../../objects/blobs/blob-store.js';

export function bucketJobs(blobs: BlobStore) {
  return [
    defineJob({
      kind: 'objects.delete-blob',
      payload: z.object({ ns: z.string(), blobId: z.string() }),
      maxAttempts: 10,
      backoffMs: exponentialBackoff(1000),
      async run({ ns, blobId }) {
        await blobs.delete(ns, blobId);
      },
    }),
    defineJob({
      kind: 'buckets.purge',
      payload: z.object({ ns: z.string() }),
      maxAttempts: 10,
      backoffMs: exponentialBackoff(1000),
      async run({ ns }) {
        await blobs.deleteNamespace(ns);
      },
    }),
  ];
}
