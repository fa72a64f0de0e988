/** Multipart upload at the gateway: create, upload part, list parts, complete, abort, list uploads. */
import { Readable } from 'node:stream';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ObjectError } from '../../services/buckets/object-error.js';
import {
  abortUpload,
  completeUpload,
  createUpload,
  listParts,
  listUploads,
  uploadPart,
} from '../../services/buckets/multipart.js';
import { headObject } from '../../services/buckets/objects.js';
import type { ServiceContext } from '../../services/context.js';
import type { Authorized } from './authorize.js';
import { readSmallBody, requestBody } from './body.js';
import { copySourceKey, metadataOf } from './objects.js';
import type { S3Target } from './request.js';
import { isoDate, parseCompleteMultipart, xmlDocument } from './xml.js';

function sendXml(reply: FastifyReply, root: string, body: Parameters<typeof xmlDocument>[1]) {
  return reply.code(200).header('content-type', 'application/xml').send(xmlDocument(root, body));
}

export async function handleCreateUpload(
  ctx: ServiceContext,
  req: FastifyRequest,
  reply: FastifyReply,
  t: S3Target,
  a: Authorized,
) {
  const ct = req.headers['content-type'];
  const id = await createUpload(ctx, a.grant.bucketId, t.key!, {
    contentType: typeof ct === 'string' && ct ? ct : undefined,
    metadata: metadataOf(req),
  });
  return sendXml(reply, 'InitiateMultipartUploadResult', {
    Bucket: a.grant.bucketName,
    Key: t.key!,
    UploadId: id,
  });
}

export async function handleUploadPart(
  ctx: ServiceContext,
  req: FastifyRequest,
  reply: FastifyReply,
  t: S3Target,
  a: Authorized,
) {
  const partNumber = Number(t.query.get('partNumber'));
  const { stream, put, checksumHeaders } = requestBody(req, a.auth);
  const etag = await uploadPart(
    ctx,
    a.grant.bucketId,
    t.key!,
    t.query.get('uploadId')!,
    partNumber,
    stream,
    put,
  );
  reply.header('etag', etag);
  for (const [k, v] of Object.entries(checksumHeaders())) reply.header(k, v);
  return reply.code(200).send();
}

/**
 * UploadPartCopy (a PUT of a part with `x-amz-copy-source`): the part's bytes come from an
 * object of the same bucket, whole or the `x-amz-copy-source-range` of it. Clients use it
 * to copy large objects (`aws s3 cp s3://… s3://…` above 8 MiB).
 */
export async function handleUploadPartCopy(
  ctx: ServiceContext,
  req: FastifyRequest,
  reply: FastifyReply,
  t: S3Target,
  a: Authorized,
) {
  const key = copySourceKey(req, a);
  const head = await headObject(ctx.db, a.grant.bucketId, key);
  if (!head) throw new ObjectError('NoSuchKey', 'The specified key does not exist.', { Key: key });
  const header = req.headers['x-amz-copy-source-range'];
  let range: { start: number; end: number } | undefined;
  if (typeof header === 'string') {
    const m = /^bytes=(\d+)-(\d+)$/.exec(header.trim());
    const start = Number(m?.[1]);
    const end = Number(m?.[2]);
    if (!m || end < start || end >= head.size) {
      throw new ObjectError(
        'InvalidArgument',
        'The x-amz-copy-source-range value must be of the form bytes=first-last where first and last are the zero-based offsets of the first and last bytes to copy',
      );
    }
    range = { start, end };
  }
  // The blob of the version just read: a concurrent overwrite cannot mix two versions.
  const body =
    head.size === 0 ? Readable.from([]) : await ctx.blobs.get(a.grant.bucketId, head.blobId, range);
  let etag: string;
  try {
    etag = await uploadPart(
      ctx,
      a.grant.bucketId,
      t.key!,
      t.query.get('uploadId')!,
      Number(t.query.get('partNumber')),
      body,
      { size: range ? range.end - range.start + 1 : head.size },
    );
  } finally {
    // A refused part (bad upload id or number) never reads the source: close its file now.
    body.destroy();
  }
  return sendXml(reply, 'CopyPartResult', { LastModified: isoDate(ctx.clock()), ETag: etag });
}

export async function handleListParts(
  ctx: ServiceContext,
  reply: FastifyReply,
  t: S3Target,
  a: Authorized,
) {
  const uploadId = t.query.get('uploadId')!;
  const parts = await listParts(ctx.db, a.grant.bucketId, t.key!, uploadId);
  return sendXml(reply, 'ListPartsResult', {
    Bucket: a.grant.bucketName,
    Key: t.key!,
    UploadId: uploadId,
    PartNumberMarker: 0,
    NextPartNumberMarker: parts.at(-1)?.partNumber ?? 0,
    MaxParts: 10000,
    IsTruncated: false,
    Part: parts.map((p) => ({
      PartNumber: p.partNumber,
      LastModified: isoDate(p.lastModified),
      ETag: p.etag,
      Size: p.size,
    })),
  });
}

export async function handleComplete(
  ctx: ServiceContext,
  req: FastifyRequest,
  reply: FastifyReply,
  t: S3Target,
  a: Authorized,
) {
  const text = await readSmallBody(req, a.auth, 4 * 1024 * 1024);
  const parts = parseCompleteMultipart(text);
  if (parts.length > 10_000) throw new ObjectError('MalformedXML', 'At most 10000 parts.');
  const meta = await completeUpload(ctx, a.grant.bucketId, t.key!, t.query.get('uploadId')!, parts);
  return sendXml(reply, 'CompleteMultipartUploadResult', {
    Location: `${ctx.config.publicUrl}/s3/${a.grant.bucketName}/${encodeURIComponent(t.key!)}`,
    Bucket: a.grant.bucketName,
    Key: t.key!,
    ETag: meta.etag,
  });
}

export async function handleAbort(
  ctx: ServiceContext,
  reply: FastifyReply,
  t: S3Target,
  a: Authorized,
) {
  await abortUpload(ctx, a.grant.bucketId, t.key!, t.query.get('uploadId')!);
  return reply.code(204).send();
}

export async function handleListUploads(
  ctx: ServiceContext,
  reply: FastifyReply,
  t: S3Target,
  a: Authorized,
) {
  const uploads = await listUploads(ctx.db, a.grant.bucketId, t.query.get('prefix') ?? '');
  return sendXml(reply, 'ListMultipartUploadsResult', {
    Bucket: a.grant.bucketName,
    KeyMarker: '',
    UploadIdMarker: '',
    MaxUploads: 1000,
    IsTruncated: false,
    Upload: uploads.map((u) => ({
      Key: u.key,
      UploadId: u.id,
      Initiated: isoDate(u.created_at),
      StorageClass: 'STANDARD',
    })),
  });
}
