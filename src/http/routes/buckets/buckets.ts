/** Buckets (spec 4.5): create, list, read, name availability, delete. */
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import {
  bucketNameAvailability,
  bucketSchema,
  createBucket,
  createBucketBody,
  deleteBucket,
  findBucket,
  listBuckets,
  toBucket,
} from '../../../services/buckets/buckets.js';
import type { AppDeps } from '../../app.js';
import { principalOf } from '../../plugins/auth.js';
import { auth } from '../../route-auth.js';

export const bucketParams = z.object({ name: z.string().min(1).max(63) });

export function bucketRoutes(root: FastifyInstance, { ctx }: AppDeps): void {
  const app = root.withTypeProvider<ZodTypeProvider>();

  app.post('/v1/buckets', {
    config: { auth: auth.F('AW') },
    schema: {
      tags: ['buckets'],
      summary: 'Create a bucket',
      body: createBucketBody,
      response: { 201: bucketSchema },
    },
    handler: async (req, reply) =>
      reply.code(201).send(await createBucket(ctx, principalOf(req).orgId, req.body.name)),
  });

  app.get('/v1/buckets', {
    config: { auth: auth.R('AA') },
    schema: {
      tags: ['buckets'],
      summary: 'List buckets',
      response: { 200: z.array(bucketSchema) },
    },
    handler: async (req) => listBuckets(ctx, principalOf(req).orgId),
  });

  app.get('/v1/bucket-names/:name', {
    config: { auth: auth.R('AA') },
    schema: {
      tags: ['buckets'],
      summary: 'Whether a bucket name can be had',
      // Any name can be asked about: one no bucket can have answers reason 'invalid'.
      params: z.object({ name: z.string().min(1).max(1024) }),
      response: {
        200: z.object({
          name: z.string(),
          available: z.boolean(),
          reason: z.enum(['taken', 'taken-by-you', 'reserved', 'invalid']).optional(),
        }),
      },
    },
    handler: async (req) => bucketNameAvailability(ctx, principalOf(req).orgId, req.params.name),
  });

  app.get('/v1/buckets/:name', {
    config: { auth: auth.R('AA') },
    schema: {
      tags: ['buckets'],
      summary: 'One bucket',
      params: bucketParams,
      response: { 200: bucketSchema },
    },
    handler: async (req) =>
      toBucket(await findBucket(ctx.db, principalOf(req).orgId, req.params.name)),
  });

  app.delete('/v1/buckets/:name', {
    config: { auth: auth.F('AW') },
    schema: {
      tags: ['buckets'],
      summary: 'Delete a bucket',
      description:
        'Without force, a bucket with objects (409 bucket-not-empty) or attachments (409 bucket-attached) ' +
        'is refused. With force=true, its objects are deleted and every app is detached.',
      params: bucketParams,
      querystring: z.strictObject({ force: z.enum(['true', 'false', '1', '0']).optional() }),
      response: {
        200: z.object({
          destroyed: z.boolean(),
          deletedObjects: z.number(),
          detached: z.array(z.string()),
        }),
      },
    },
    handler: async (req) => {
      const force = req.query.force === 'true' || req.query.force === '1';
      return deleteBucket(ctx, principalOf(req).orgId, req.params.name, force);
    },
  });
}
