/** Bucket operations of the gateway: ListBuckets, HeadBucket, GetBucketLocation, ListObjects(V2), DeleteObjects. */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ObjectError } from '../../services/buckets/object-error.js';
import { deleteObjects, listObjects } from '../../services/buckets/objects.js';
import type { ServiceContext } from '../../services/context.js';
import { uriEncode } from '../../objects/sigv4/uri.js';
import type { Authorized } from './authorize.js';
import { readSmallBody } from './body.js';
import { intParam, type S3Target } from './request.js';
import { isoDate, parseDelete, xmlDocument, type XmlNode } from './xml.js';

function sendXml(reply: FastifyReply, root: string, body: XmlNode) {
  return reply.code(200).header('content-type', 'application/xml').send(xmlDocument(root, body));
}

export async function handleListBuckets(ctx: ServiceContext, reply: FastifyReply, a: Authorized) {
  const row = await ctx.db
    .selectFrom('buckets')
    .select(['name', 'created_at'])
    .where('id', '=', a.grant.bucketId)
    .executeTakeFirstOrThrow();
  return sendXml(reply, 'ListAllMyBucketsResult', {
    Owner: { ID: a.grant.orgId, DisplayName: a.grant.orgId },
    Buckets: { Bucket: [{ Name: row.name, CreationDate: isoDate(row.created_at) }] },
  });
}

export function handleLocation(ctx: ServiceContext, reply: FastifyReply) {
  return reply
    .code(200)
    .header('content-type', 'application/xml')
    .send(
      `<?xml version="1.0" encoding="UTF-8"?>\n<LocationConstraint xmlns="http://s3.amazonaws.com/doc/2006-03-01/">${ctx.config.region}</LocationConstraint>`,
    );
}

function continuationToken(key: string): string {
  return Buffer.from(key, 'utf8').toString('base64url');
}

function fromContinuationToken(token: string): string {
  const key = Buffer.from(token, 'base64url').toString('utf8');
  if (!key || continuationToken(key) !== token) {
    throw new ObjectError('InvalidArgument', 'The continuation token provided is incorrect.');
  }
  return key;
}

/** ListObjectsV2 (`list-type=2`) and the original ListObjects (markers). */
export async function handleListObjects(
  ctx: ServiceContext,
  reply: FastifyReply,
  t: S3Target,
  a: Authorized,
) {
  const q = t.query;
  const v2 = q.get('list-type') === '2';
  const prefix = q.get('prefix') ?? '';
  const delimiter = q.get('delimiter') || undefined;
  const maxKeys = intParam(q, 'max-keys', 1000, 0, 1000);
  const urlEncode = q.get('encoding-type') === 'url';
  if (q.has('encoding-type') && !urlEncode)
    throw new ObjectError('InvalidArgument', 'Invalid Encoding Method specified in Request');
  const enc = (s: string) => (urlEncode ? uriEncode(s).replace(/%2F/g, '/') : s);
  let after: string | undefined;
  if (v2) {
    const token = q.get('continuation-token');
    after = token ? fromContinuationToken(token) : q.get('start-after') || undefined;
  } else {
    after = q.get('marker') || undefined;
  }
  const page =
    maxKeys === 0
      ? { objects: [], commonPrefixes: [], truncated: false, last: undefined }
      : await listObjects(ctx.db, a.grant.bucketId, { prefix, delimiter, after, limit: maxKeys });
  const contents = page.objects.map((o) => ({
    Key: enc(o.key),
    LastModified: isoDate(o.lastModified),
    ETag: o.etag,
    Size: o.size,
    ...(v2 && q.get('fetch-owner') !== 'true'
      ? {}
      : { Owner: { ID: a.grant.orgId, DisplayName: a.grant.orgId } }),
    StorageClass: 'STANDARD',
  }));
  const common = page.commonPrefixes.map((p) => ({ Prefix: enc(p) }));
  const body: XmlNode = {
    Name: a.grant.bucketName,
    Prefix: enc(prefix),
    ...(v2
      ? {
          ...(q.has('continuation-token')
            ? { ContinuationToken: q.get('continuation-token') }
            : {}),
          ...(q.has('start-after') ? { StartAfter: enc(q.get('start-after')!) } : {}),
          KeyCount: contents.length + common.length,
        }
      : { Marker: enc(q.get('marker') ?? '') }),
    MaxKeys: maxKeys,
    ...(delimiter ? { Delimiter: enc(delimiter) } : {}),
    ...(urlEncode ? { EncodingType: 'url' } : {}),
    IsTruncated: page.truncated,
    ...(page.truncated && page.last
      ? v2
        ? { NextContinuationToken: continuationToken(page.last) }
        : delimiter
          ? { NextMarker: enc(page.last) }
          : {}
      : {}),
    Contents: contents,
    CommonPrefixes: common,
  };
  return sendXml(reply, 'ListBucketResult', body);
}

/** DeleteObjects: `POST /bucket?delete` with an XML list of keys. */
export async function handleDeleteMany(
  ctx: ServiceContext,
  req: FastifyRequest,
  reply: FastifyReply,
  a: Authorized,
) {
  const text = await readSmallBody(req, a.auth, 2 * 1024 * 1024);
  const { keys, quiet } = parseDelete(text);
  await deleteObjects(ctx, a.grant.bucketId, [...new Set(keys)]);
  // S3 reports every key asked for as deleted, whether or not it existed.
  return sendXml(reply, 'DeleteResult', { Deleted: quiet ? [] : keys.map((k) => ({ Key: k })) });
}
