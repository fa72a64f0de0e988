/**
 * Presigned URLs of the spec route (2.7, 4.5): real SigV4 query signatures by the
 * bucket's own platform key, valid at the S3 gateway, usable with plain curl or fetch.
 */
import { z } from 'zod';
import { presignUrl } from '../../objects/sigv4/index.js';
import { encodeKeyPath } from '../../objects/sigv4/uri.js';
import type { ServiceContext } from '../context.js';
import { findBucket } from './buckets.js';
import { presignKeyOf } from './s3-keys.js';

export const S3_PATH_PREFIX = '/s3';

export const presignBody = z
  .strictObject({
    op: z.enum(['get', 'put']).default('get'),
    key: z.string().min(1).max(1024),
    expiresInS: z.number().int().min(1).max(604_800).default(900),
    contentType: z.string().min(1).max(255).optional(),
  })
  .superRefine((b, ctx) => {
    if (b.contentType !== undefined && b.op !== 'put') {
      ctx.addIssue({ code: 'custom', path: ['contentType'], message: 'only with op put' });
    }
  });

export const presignedSchema = z.object({
  url: z.string(),
  method: z.enum(['GET', 'PUT']),
  key: z.string(),
  expiresAt: z.string(),
  requiredHeaders: z.record(z.string(), z.string()),
});

export async function presign(
  ctx: ServiceContext,
  orgId: string,
  bucketName: string,
  body: z.output<typeof presignBody>,
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
