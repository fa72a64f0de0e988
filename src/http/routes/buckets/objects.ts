/** Objects through the JSON API (spec 4.5): listing, deletion, presigned URLs. */
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { ApiError } from '../../../errors/api-error.js';
import { findBucket } from '../../../services/buckets/buckets.js';
import { deleteObjects, listObjects } from '../../../services/buckets/objects.js';
import { presign, presignBody, presignedSchema } from '../../../services/buckets/presign.js';
import type { AppDeps } from '../../app.js';
import { principalOf } from '../../plugins/auth.js';
import { auth } from '../../route-auth.js';
import { bucketParams } from './buckets.js';

function encodeCursor(key: string): string {
  return Buffer.from(key, 'utf8').toString('base64url');
}

function decodeCursor(cursor: string): string {
  const key = Buffer.from(cursor, 'base64url').toString('utf8');
  if (!key || encodeCursor(key) !== cursor) {
    throw new ApiError('bad-request', 'Invalid cursor: pass the nextCursor of the previous page.', {
      issues: [{ path: 'cursor', message: 'not a cursor of this route' }],
    });
  }
  return key;
}

const keys = z.union([
  z.string().min(1).max(1024),
  z.array(z.string().min(1).max(1024)).min(1).max(1000),
]);

export function bucketObjectRoutes(root: FastifyInstance, { ctx }: AppDeps): void {
  const app = root.withTypeProvider<ZodTypeProvider>();

  app.post('/v1/buckets/:name/presign', {
    config: { auth: auth.F('AW') },
    schema: {
      tags: ['buckets'],
      summary: 'A presigned URL to get or put one object',
      params: bucketParams,
      body: presignBody,
      response: { 200: presignedSchema },
    },
    handler: async (req) => presign(ctx, principalOf(req).orgId, req.params.name, req.body),
  });

  app.get('/v1/buckets/:name/objects', {
    config: { auth: auth.R('AD') },
    schema: {
      tags: ['buckets'],
      summary: 'One page of objects in key order',
      params: bucketParams,
      querystring: z.strictObject({
        limit: z.coerce.number().int().min(1).max(1000).default(100),
        prefix: z.string().max(1024).optional(),
        cursor: z.string().min(1).max(2048).optional(),
      }),
      response: {
        200: z.object({
          bucket: z.string(),
          objects: z.array(
            z.object({ key: z.string(), sizeBytes: z.number(), lastModified: z.string() }),
          ),
          nextCursor: z.string().optional(),
        }),
      },
    },
    handler: async (req) => {
      const bucket = await findBucket(ctx.db, principalOf(req).orgId, req.params.name);
      const page = await listObjects(ctx.db, bucket.id, {
        prefix: req.query.prefix,
        after: req.query.cursor ? decodeCursor(req.query.cursor) : undefined,
        limit: req.query.limit,
      });
      return {
        bucket: bucket.name,
        objects: page.objects.map((o) => ({
          key: o.key,
          sizeBytes: o.size,
          lastModified: o.lastModified.toISOString(),
        })),
        ...(page.truncated && page.last ? { nextCursor: encodeCursor(page.last) } : {}),
      };
    },
  });

  app.delete('/v1/buckets/:name/objects', {
    config: { auth: auth.F('AW') },
    schema: {
      tags: ['buckets'],
      summary: 'Delete objects by key (repeat `key` for several)',
      params: bucketParams,
      querystring: z.strictObject({ key: keys }),
      response: { 200: z.object({ bucket: z.string(), deleted: z.array(z.string()) }) },
    },
    handler: async (req) => {
      const bucket = await findBucket(ctx.db, principalOf(req).orgId, req.params.name);
      const wanted = Array.isArray(req.query.key) ? req.query.key : [req.query.key];
      return {
        bucket: bucket.name,
        deleted: await deleteObjects(ctx, bucket.id, [...new Set(wanted)]),
      };
    },
  });
}
