/**
 * Multipart uploads: each part is a blob of its own; completion concatenates the chosen
 * parts into the object's blob and makes it visible in one transaction that also drops
 * the upload and schedules its part blobs for deletion.
 */
import { randomBytes } from 'node:crypto';
import type { Readable } from 'node:stream';
import { enqueue } from '../../jobs/queue.js';
import type { Executor } from '../../store/db.js';
import type { ServiceContext } from '../context.js';
import { ObjectError } from './object-error.js';
import {
  MAX_PUT_BYTES,
  checkDigests,
  commitObject,
  multipartEtag,
  newBlobId,
  type ObjectMeta,
  type PutOptions,
} from './objects.js';

/** Every part but the last must be at least this large (as S3). */
export const MIN_PART_BYTES = 5 * 1024 * 1024;

export interface PartInfo {
  partNumber: number;
  etag: string;
  size: number;
  lastModified: Date;
}

async function findUpload(
  ex: Executor,
  bucketId: string,
  uploadId: string,
  key: string,
  opts: { lock?: boolean } = {},
) {
  let q = ex
    .selectFrom('multipart_uploads')
    .select(['id', 'content_type', 'metadata'])
    .where('id', '=', uploadId)
    .where('bucket_id', '=', bucketId)
    .where('key', '=', key);
  // Part writes, completion and abort of one upload take turns on its row, so no part
  // blob is written after completion or abort has listed the parts to delete.
  if (opts.lock) q = q.forUpdate();
  const row = await q.executeTakeFirst();
  if (!row) {
    throw new ObjectError('NoSuchUpload', 'The specified multipart upload does not exist.', {
      UploadId: uploadId,
    });
  }
  return row;
}

export async function createUpload(
  ctx: ServiceContext,
  bucketId: string,
  key: string,
  opts: { contentType?: string; metadata?: Record<string, string> },
): Promise<string> {
  const id = `u${randomBytes(20).toString('hex')}`;
  await ctx.db
    .insertInto('multipart_uploads')
    .values({
      id,
      bucket_id: bucketId,
      key,
      content_type: opts.contentType ?? null,
      metadata: JSON.stringify(opts.metadata ?? {}),
      created_at: ctx.clock(),
    })
    .execute();
  return id;
}

export async function uploadPart(
  ctx: ServiceContext,
  bucketId: string,
  key: string,
  uploadId: string,
  partNumber: number,
  body: Readable,
  opts: PutOptions,
): Promise<string> {
  if (!Number.isInteger(partNumber) || partNumber < 1 || partNumber > 10_000) {
    throw new ObjectError(
      'InvalidArgument',
      'Part number must be an integer between 1 and 10000, inclusive.',
    );
  }
  await findUpload(ctx.db, bucketId, uploadId, key);
  const blobId = newBlobId();
  const written = await ctx.blobs.put(bucketId, blobId, body, {
    sha256: opts.sha256Hex !== undefined,
    maxBytes: MAX_PUT_BYTES,
    sizeHint: opts.size,
    verify: (r) => checkDigests(r, opts),
  });
  const etag = `"${written.md5.toString('hex')}"`;
  try {
    await ctx.db.transaction().execute(async (tx) => {
      await findUpload(tx, bucketId, uploadId, key, { lock: true });
      const previous = await tx
        .selectFrom('multipart_parts')
        .select('blob_id')
        .where('upload_id', '=', uploadId)
        .where('part_number', '=', partNumber)
        .forUpdate()
        .executeTakeFirst();
      await tx
        .insertInto('multipart_parts')
        .values({
          upload_id: uploadId,
          part_number: partNumber,
          blob_id: blobId,
          size: written.size,
          etag,
          last_modified: ctx.clock(),
        })
        .onConflict((oc) =>
          oc
            .columns(['upload_id', 'part_number'])
            .doUpdateSet({ blob_id: blobId, size: written.size, etag, last_modified: ctx.clock() }),
        )
        .execute();
      if (previous)
        await enqueue(tx, ctx.jobs, 'objects.delete-blob', {
          ns: bucketId,
          blobId: previous.blob_id,
        });
    });
  } catch (err) {
    await ctx.blobs.delete(bucketId, blobId).catch(() => {});
    throw err;
  }
  return etag;
}

export async function listParts(
  ex: Executor,
  bucketId: string,
  key: string,
  uploadId: string,
): Promise<PartInfo[]> {
  await findUpload(ex, bucketId, uploadId, key);
  const rows = await ex
    .selectFrom('multipart_parts')
    .select(['part_number', 'etag', 'size', 'last_modified'])
    .where('upload_id', '=', uploadId)
    .orderBy('part_number')
    .execute();
  return rows.map((r) => ({
    partNumber: r.part_number,
    etag: r.etag,
    size: Number(r.size),
    lastModified: r.last_modified,
  }));
}

export async function completeUpload(
  ctx: ServiceContext,
  bucketId: string,
  key: string,
  uploadId: string,
  chosen: { partNumber: number; etag: string }[],
): Promise<ObjectMeta> {
  const upload = await findUpload(ctx.db, bucketId, uploadId, key);
  if (chosen.length === 0)
    throw new ObjectError('MalformedXML', 'The XML you provided did not list any part.');
  for (let i = 1; i < chosen.length; i++) {
    if (chosen[i]!.partNumber <= chosen[i - 1]!.partNumber) {
      throw new ObjectError('InvalidPartOrder', 'The list of parts was not in ascending order.');
    }
  }
  const stored = await ctx.db
    .selectFrom('multipart_parts')
    .select(['part_number', 'etag', 'size', 'blob_id'])
    .where('upload_id', '=', uploadId)
    .execute();
  const byNumber = new Map(stored.map((p) => [p.part_number, p]));
  const parts = chosen.map((c, i) => {
    const p = byNumber.get(c.partNumber);
    if (!p || p.etag.replace(/"/g, '') !== c.etag.replace(/"/g, '')) {
      throw new ObjectError(
        'InvalidPart',
        `Part ${c.partNumber} was not uploaded or its ETag does not match.`,
      );
    }
    if (i < chosen.length - 1 && Number(p.size) < MIN_PART_BYTES) {
      throw new ObjectError(
        'EntityTooSmall',
        `Part ${c.partNumber} is smaller than the 5 MiB minimum of every part but the last.`,
      );
    }
    return p;
  });
  const blobId = newBlobId();
  const whole = await ctx.blobs.concat(
    bucketId,
    blobId,
    parts.map((p) => p.blob_id),
  );
  return commitObject(
    ctx,
    bucketId,
    key,
    blobId,
    {
      size: whole.size,
      etag: multipartEtag(parts.map((p) => p.etag)),
      contentType: upload.content_type,
      metadata: upload.metadata ?? {},
    },
    async (tx) => dropUploadAndParts(tx, ctx, bucketId, uploadId, key),
  );
}

/** Removes the upload row (its part rows go with it). */
async function dropUpload(
  tx: Executor,
  bucketId: string,
  uploadId: string,
  key: string,
): Promise<void> {
  const deleted = await tx
    .deleteFrom('multipart_uploads')
    .where('id', '=', uploadId)
    .where('bucket_id', '=', bucketId)
    .where('key', '=', key)
    .returning('id')
    .executeTakeFirst();
  if (!deleted)
    throw new ObjectError('NoSuchUpload', 'The specified multipart upload does not exist.', {
      UploadId: uploadId,
    });
  // The part rows go with the upload (cascade); callers schedule their blobs first.
}

export async function abortUpload(
  ctx: ServiceContext,
  bucketId: string,
  key: string,
  uploadId: string,
): Promise<void> {
  await ctx.db.transaction().execute((tx) => dropUploadAndParts(tx, ctx, bucketId, uploadId, key));
}

/**
 * Removes the upload and schedules every part blob for deletion, holding the upload's row
 * so that no part write slips in between the listing of parts and the removal.
 */
async function dropUploadAndParts(
  tx: Executor,
  ctx: ServiceContext,
  bucketId: string,
  uploadId: string,
  key: string,
): Promise<void> {
  await findUpload(tx, bucketId, uploadId, key, { lock: true });
  const parts = await tx
    .selectFrom('multipart_parts')
    .select('blob_id')
    .where('upload_id', '=', uploadId)
    .execute();
  await dropUpload(tx, bucketId, uploadId, key);
  for (const p of parts) {
    await enqueue(tx, ctx.jobs, 'objects.delete-blob', { ns: bucketId, blobId: p.blob_id });
  }
}

export async function listUploads(ex: Executor, bucketId: string, prefix = '') {
  return ex
    .selectFrom('multipart_uploads')
    .select(['id', 'key', 'created_at'])
    .where('bucket_id', '=', bucketId)
    .where('key', 'like', `${prefix.replace(/[\\%_]/g, '\\$&')}%`)
    .orderBy('key')
    .orderBy('created_at')
    .limit(1000)
    .execute();
}
