/** Objects through the JSON API (spec 4.5): listing, deletion, presigned URLs. */
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import {
  bucketParams,
  deleteObjectsQuery,
  deletedObjectsSchema,
  objectListQuery,
  objectPageSchema,
  presignBody,
  presignedSchema,
} from '../../../contracts/buckets.js';
import { ApiError } from '../../../errors/api-error.js';
import { findBucket } from '../../../services/buckets/buckets.js';
import { deleteObjects, listObjects } from '../../../services/buckets/objects.js';
import { presign } from '../../../services/buckets/presign.js';
import type { AppDeps } from '../../deps.js';
import { principalOf } from '../../plugins/auth.js';
import { auth } from '../../route-auth.js';

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
      querystring: objectListQuery,
      response: { 200: objectPageSchema },
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
      querystring: deleteObjectsQuery,
      response: { 200: deletedObjectsSchema },
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
