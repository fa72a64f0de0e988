/** Buckets (spec 4.5): create, list, read, name availability, delete. */
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import {
  bucketListSchema,
  bucketNameAvailabilitySchema,
  bucketNameParams,
  bucketParams,
  bucketSchema,
  createBucketBody,
  deleteBucketQuery,
  deletedBucketSchema,
} from '../../../contracts/buckets.js';
import {
  bucketNameAvailability,
  createBucket,
  deleteBucket,
  findBucket,
  listBuckets,
  toBucket,
} from '../../../services/buckets/buckets.js';
import type { AppDeps } from '../../deps.js';
import { principalOf } from '../../plugins/auth.js';
import { auth } from '../../route-auth.js';

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
      response: { 200: bucketListSchema },
    },
    handler: async (req) => listBuckets(ctx, principalOf(req).orgId),
  });

  app.get('/v1/bucket-names/:name', {
    config: { auth: auth.R('AA') },
    schema: {
      tags: ['buckets'],
      summary: 'Whether a bucket name can be had',
      // Any name can be asked about: one no bucket can have answers reason 'invalid'.
      params: bucketNameParams,
      response: { 200: bucketNameAvailabilitySchema },
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
      querystring: deleteBucketQuery,
      response: { 200: deletedBucketSchema },
    },
    handler: async (req) => {
      const force = req.query.force === 'true' || req.query.force === '1';
      return deleteBucket(ctx, principalOf(req).orgId, req.params.name, force);
    },
  });
}
