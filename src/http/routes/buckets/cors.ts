/** CORS rules of a bucket (spec 4.5). */
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { bucketParams, corsSchema, putCorsBody } from '../../../contracts/buckets.js';
import { getCors, putCors } from '../../../services/buckets/cors.js';
import type { AppDeps } from '../../deps.js';
import { principalOf } from '../../plugins/auth.js';
import { auth } from '../../route-auth.js';

export function bucketCorsRoutes(root: FastifyInstance, { ctx }: AppDeps): void {
  const app = root.withTypeProvider<ZodTypeProvider>();

  app.get('/v1/buckets/:name/cors', {
    config: { auth: auth.R('AA') },
    schema: {
      tags: ['buckets'],
      summary: 'CORS rules',
      params: bucketParams,
      response: { 200: corsSchema },
    },
    handler: async (req) => getCors(ctx, principalOf(req).orgId, req.params.name),
  });

  app.put('/v1/buckets/:name/cors', {
    config: { auth: auth.F('AW') },
    schema: {
      tags: ['buckets'],
      summary: 'Replace the CORS rules (an empty list removes them)',
      params: bucketParams,
      body: putCorsBody,
      response: { 200: corsSchema },
    },
    handler: async (req) => putCors(ctx, principalOf(req).orgId, req.params.name, req.body.rules),
  });
}
