/**
 * S3 credentials of a bucket for people's tools (pier's design; the spec gives apps keys
 * through attachments): create (the secret is shown once), list, revoke.
 */
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import {
  bucketParams,
  createdS3KeySchema,
  s3KeyListSchema,
  s3KeyParams,
} from '../../../contracts/buckets.js';
import {
  createPersonKey,
  deletePersonKey,
  listBucketKeys,
} from '../../../services/buckets/s3-keys.js';
import type { AppDeps } from '../../deps.js';
import { principalOf } from '../../plugins/auth.js';
import { auth } from '../../route-auth.js';

export function bucketCredentialRoutes(root: FastifyInstance, { ctx }: AppDeps): void {
  const app = root.withTypeProvider<ZodTypeProvider>();

  app.post('/v1/buckets/:name/credentials', {
    config: { auth: auth.F('A0') },
    schema: {
      tags: ['buckets'],
      summary: 'Mint S3 credentials for this bucket (secret shown once)',
      params: bucketParams,
      response: { 201: createdS3KeySchema },
    },
    handler: async (req, reply) =>
      reply.code(201).send(await createPersonKey(ctx, principalOf(req).orgId, req.params.name)),
  });

  app.get('/v1/buckets/:name/credentials', {
    config: { auth: auth.F('AA') },
    schema: {
      tags: ['buckets'],
      summary: 'S3 credentials of the bucket (never secrets)',
      params: bucketParams,
      response: { 200: s3KeyListSchema },
    },
    handler: async (req) => listBucketKeys(ctx, principalOf(req).orgId, req.params.name),
  });

  app.delete('/v1/buckets/:name/credentials/:accessKeyId', {
    config: { auth: auth.F('A0') },
    schema: {
      tags: ['buckets'],
      summary: 'Revoke S3 credentials',
      params: s3KeyParams,
    },
    handler: async (req, reply) => {
      await deletePersonKey(ctx, principalOf(req).orgId, req.params.name, req.params.accessKeyId);
      return reply.code(204).send();
    },
  });
}
