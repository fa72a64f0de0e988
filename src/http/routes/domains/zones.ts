/** Whole-zone claims (spec 2.10, 4.8). */
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import {
  claimZoneBody,
  zoneCheckAnswerSchema,
  zoneListSchema,
  zoneParams,
  zoneSchema,
} from '../../../contracts/zones.js';
import {
  checkZone,
  claimZone,
  getZone,
  listZones,
  releaseZone,
} from '../../../services/domains/zones.js';
import type { AppDeps } from '../../deps.js';
import { principalOf } from '../../plugins/auth.js';
import { auth } from '../../route-auth.js';

export function zoneRoutes(root: FastifyInstance, { ctx }: AppDeps): void {
  const app = root.withTypeProvider<ZodTypeProvider>();
  const tags = ['domains'];

  app.post('/v1/domains/zones', {
    config: { auth: auth.F('AW') },
    schema: {
      tags,
      summary: 'Claim a whole zone (200 when already yours, 201 new)',
      body: claimZoneBody,
      response: { 200: zoneSchema, 201: zoneSchema },
    },
    handler: async (req, reply) => {
      const { created, zone } = await claimZone(ctx, principalOf(req).orgId, req.body.zone);
      return reply.code(created ? 201 : 200).send(zone);
    },
  });

  app.get('/v1/domains/zones', {
    config: { auth: auth.R('AA') },
    schema: { tags, summary: "The organization's zones", response: { 200: zoneListSchema } },
    handler: async (req) => listZones(ctx, principalOf(req).orgId),
  });

  app.get('/v1/domains/zones/:zone', {
    config: { auth: auth.R('AA') },
    schema: { tags, summary: 'A zone', params: zoneParams, response: { 200: zoneSchema } },
    handler: async (req) => getZone(ctx, principalOf(req).orgId, req.params.zone),
  });

  app.post('/v1/domains/zones/:zone/check', {
    config: { auth: auth.F('AW') },
    schema: {
      tags,
      summary: "Queue a check of the zone's records and certificate",
      params: zoneParams,
      response: { 200: zoneCheckAnswerSchema },
    },
    handler: async (req) => checkZone(ctx, principalOf(req).orgId, req.params.zone),
  });

  app.delete('/v1/domains/zones/:zone', {
    config: { auth: auth.F('AW') },
    schema: { tags, summary: 'Release a zone', params: zoneParams },
    handler: async (req, reply) => {
      await releaseZone(ctx, principalOf(req).orgId, req.params.zone);
      return reply.code(204).send();
    },
  });
}
