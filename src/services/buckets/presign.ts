/**
 * Presigned URLs of the spec route (2.7, 4.5): real SigV4 query signatures by the
 * bucket's own platform key, valid at the S3 gateway, usable with plain curl or fetch.
 */
import type { PresignBody } from '../../contracts/buckets.js';
import { presignUrl } from '../../objects/sigv4/index.js';
import { encodeKeyPath } from '../../objects/sigv4/uri.js';
import type { ServiceContext } from '../context.js';
import { findBucket } from './records.js';
import { presignKeyOf } from './s3-keys.js';

export const S3_PATH_PREFIX = '/s3';

export async function presign(
  ctx: ServiceContext,
  orgId: string,
  bucketName: string,
  body: PresignBody,
) {
  const bucket = await findBucket(ctx.db, orgId, bucketName);
  const key = await presignKeyOf(ctx, bucket.id);
  const now = ctx.clock();
  const method = body.op === 'put' ? 'PUT' : 'GET';
  const { url, requiredHeaders } = presignUrl({
    method,
    baseUrl: ctx.config.publicUrl,
    path: `${S3_PATH_PREFIX}/${bucket.name}/${encodeKeyPath(body.key)}`,
    accessKeyId: key.accessKeyId,
    secret: key.secret,
    region: ctx.config.region,
    expiresInS: body.expiresInS,
    now,
    signedHeaders: body.contentType ? { 'content-type': body.contentType } : undefined,
  });
  return {
    url,
    method,
    key: body.key,
    expiresAt: new Date(now.getTime() + body.expiresInS * 1000).toISOString(),
    requiredHeaders,
  } as const;
}
