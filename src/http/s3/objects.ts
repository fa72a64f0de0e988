/** Object operations of the gateway: PutObject, CopyObject, GetObject, HeadObject, DeleteObject. */
import { buffer } from 'node:stream/consumers';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ObjectError } from '../../services/buckets/object-error.js';
import {
  deleteObjects,
  getObject,
  headObject,
  openObject,
  putObject,
  type ObjectMeta,
} from '../../services/buckets/objects.js';
import type { ServiceContext } from '../../services/context.js';
import { decodePath } from '../../objects/sigv4/uri.js';
import type { Authorized } from './authorize.js';
import { requestBody } from './body.js';
import type { S3Target } from './request.js';
import { httpDate, isoDate, xmlDocument } from './xml.js';

const META_PREFIX = 'x-amz-meta-';
/** Objects up to this size are read whole and sent in one write. */
const SMALL_OBJECT_BYTES = 64 * 1024;

/** User metadata from `x-amz-meta-*` headers (at most 2 KiB in all, as S3). */
export function metadataOf(req: FastifyRequest): Record<string, string> {
  const meta: Record<string, string> = {};
  let bytes = 0;
  for (const [name, value] of Object.entries(req.headers)) {
    if (!name.startsWith(META_PREFIX) || typeof value !== 'string') continue;
    meta[name.slice(META_PREFIX.length)] = value;
    bytes += name.length - META_PREFIX.length + value.length;
  }
  if (bytes > 2048)
    throw new ObjectError(
      'InvalidArgument',
      'Your metadata headers exceed the maximum allowed metadata size.',
    );
  return meta;
}

function contentTypeOf(req: FastifyRequest): string | undefined {
  const ct = req.headers['content-type'];
  return typeof ct === 'string' && ct.length > 0 ? ct : undefined;
}

function objectHeaders(reply: FastifyReply, meta: ObjectMeta): void {
  reply.header('etag', meta.etag);
  reply.header('last-modified', httpDate(meta.lastModified));
  reply.header('accept-ranges', 'bytes');
  reply.header('content-type', meta.contentType ?? 'binary/octet-stream');
  for (const [k, v] of Object.entries(meta.metadata)) reply.header(`${META_PREFIX}${k}`, v);
}

/** The `response-*` query parameters of GetObject (signed, so a presigned link may set them). */
const RESPONSE_OVERRIDES: Record<string, string> = {
  'response-content-type': 'content-type',
  'response-content-language': 'content-language',
  'response-expires': 'expires',
  'response-cache-control': 'cache-control',
  'response-content-disposition': 'content-disposition',
  'response-content-encoding': 'content-encoding',
};

function overrideHeaders(reply: FastifyReply, t: S3Target): void {
  for (const [param, header] of Object.entries(RESPONSE_OVERRIDES)) {
    const value = t.query.get(param);
    // A value with a line break would split the header; refuse it rather than pass it on.
    if (value !== undefined) {
      if (/[\r\n]/.test(value))
        throw new ObjectError('InvalidArgument', `Invalid value for ${param}.`);
      reply.header(header, value);
    }
  }
}

/** `bytes=a-b`, `bytes=a-` or `bytes=-n` against `size`; undefined = the whole object. */
export function parseRange(
  header: string | undefined,
  size: number,
): { start: number; end: number } | undefined {
  if (!header) return undefined;
  const m = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (!m || (m[1] === '' && m[2] === '')) return undefined; // several or odd ranges: whole object
  let start: number;
  let end: number;
  if (m[1] === '') {
    const suffix = Number(m[2]);
    if (suffix === 0)
      throw new ObjectError('InvalidRange', 'The requested range is not satisfiable.', {
        ActualObjectSize: String(size),
      });
    start = Math.max(0, size - suffix);
    end = size - 1;
  } else {
    start = Number(m[1]);
    end = m[2] === '' ? size - 1 : Math.min(Number(m[2]), size - 1);
    if (m[2] !== '' && Number(m[2]) < start) return undefined;
  }
  if (start >= size) {
    throw new ObjectError('InvalidRange', 'The requested range is not satisfiable.', {
      ActualObjectSize: String(size),
    });
  }
  return { start, end };
}

/** 304/412 answers of If-None-Match and If-Match, before any byte is read. */
function preconditions(req: FastifyRequest, meta: ObjectMeta): 'not-modified' | undefined {
  const ifMatch = req.headers['if-match'];
  if (
    typeof ifMatch === 'string' &&
    ifMatch !== '*' &&
    !ifMatch
      .split(',')
      .map((s) => s.trim())
      .includes(meta.etag)
  ) {
    throw new ObjectError(
      'PreconditionFailed',
      'At least one of the pre-conditions you specified did not hold.',
    );
  }
  const ifNoneMatch = req.headers['if-none-match'];
  if (
    typeof ifNoneMatch === 'string' &&
    (ifNoneMatch === '*' ||
      ifNoneMatch
        .split(',')
        .map((s) => s.trim())
        .includes(meta.etag))
  ) {
    return 'not-modified';
  }
  return undefined;
}

export async function handleGetObject(
  ctx: ServiceContext,
  req: FastifyRequest,
  reply: FastifyReply,
  t: S3Target,
  a: Authorized,
) {
  const head = await headObject(ctx.db, a.grant.bucketId, t.key!);
  if (!head)
    throw new ObjectError('NoSuchKey', 'The specified key does not exist.', { Key: t.key! });
  if (preconditions(req, head) === 'not-modified') {
    objectHeaders(reply, head);
    return reply.code(304).send();
  }
  const range = parseRange(req.headers.range, head.size);
  objectHeaders(reply, head);
  overrideHeaders(reply, t);
  if (req.method === 'HEAD') {
    if (range) {
      reply.header('content-range', `bytes ${range.start}-${range.end}/${head.size}`);
      return reply
        .header('content-length', String(range.end - range.start + 1))
        .code(206)
        .send();
    }
    return reply.header('content-length', String(head.size)).code(200).send();
  }
  if (head.size === 0) return reply.header('content-length', '0').code(200).send('');
  const body = await openObject(ctx, a.grant.bucketId, head, range);
  const length = range ? range.end - range.start + 1 : head.size;
  // Small objects go out as one buffer: one write with the headers instead of a stream.
  const payload = length <= SMALL_OBJECT_BYTES ? await buffer(body) : body;
  if (range) {
    reply.code(206).header('content-range', `bytes ${range.start}-${range.end}/${head.size}`);
    reply.header('content-length', String(range.end - range.start + 1));
  } else {
    reply.code(200).header('content-length', String(head.size));
  }
  return reply.send(payload);
}

export async function handlePutObject(
  ctx: ServiceContext,
  req: FastifyRequest,
  reply: FastifyReply,
  t: S3Target,
  a: Authorized,
) {
  if (req.headers['x-amz-copy-source']) return handleCopyObject(ctx, req, reply, t, a);
  const { stream, put, checksumHeaders } = requestBody(req, a.auth);
  const meta = await putObject(ctx, a.grant.bucketId, t.key!, stream, {
    ...put,
    contentType: contentTypeOf(req),
    metadata: metadataOf(req),
  });
  reply.header('etag', meta.etag);
  for (const [k, v] of Object.entries(checksumHeaders())) reply.header(k, v);
  return reply.code(200).send();
}

/** The key of `x-amz-copy-source`, which must be in the bucket the key reaches. */
export function copySourceKey(req: FastifyRequest, a: Authorized): string {
  const raw = String(req.headers['x-amz-copy-source']);
  const source = decodePath(raw.replace(/^\//, '').split('?')[0]!);
  const slash = source.indexOf('/');
  const bucket = slash < 0 ? source : source.slice(0, slash);
  const key = slash < 0 ? '' : source.slice(slash + 1);
  if (bucket !== a.grant.bucketName || !key) throw new ObjectError('AccessDenied', 'Access Denied');
  return key;
}

/** CopyObject within the bucket the key reaches (the source must be in it too). */
async function handleCopyObject(
  ctx: ServiceContext,
  req: FastifyRequest,
  reply: FastifyReply,
  t: S3Target,
  a: Authorized,
) {
  const key = copySourceKey(req, a);
  const { meta, body } = await getObject(ctx, a.grant.bucketId, key);
  const replace = req.headers['x-amz-metadata-directive'] === 'REPLACE';
  const copied = await putObject(ctx, a.grant.bucketId, t.key!, body, {
    size: meta.size,
    contentType: replace ? contentTypeOf(req) : (meta.contentType ?? undefined),
    metadata: replace ? metadataOf(req) : meta.metadata,
  });
  reply.header('content-type', 'application/xml');
  return reply.code(200).send(
    xmlDocument('CopyObjectResult', {
      LastModified: isoDate(copied.lastModified),
      ETag: copied.etag,
    }),
  );
}

export async function handleDeleteObject(
  ctx: ServiceContext,
  _req: FastifyRequest,
  reply: FastifyReply,
  t: S3Target,
  a: Authorized,
) {
  await deleteObjects(ctx, a.grant.bucketId, [t.key!]);
  return reply.code(204).send();
}
