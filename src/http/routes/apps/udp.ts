/** Public UDP endpoints of an app (spec 4.6). */
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import {
  createdUdpSchema,
  createUdpBody,
  udpIdParams,
  udpListSchema,
  udpParams as nameParams,
} from '../../../contracts/udp.js';
import { createUdp, deleteUdp, listUdp } from '../../../services/apps/udp.js';
import type { AppDeps } from '../../deps.js';
import { principalOf } from '../../plugins/auth.js';
import { appFromParams, auth } from '../../route-auth.js';

export function udpRoutes(root: FastifyInstance, { ctx }: AppDeps): void {
  const app = root.withTypeProvider<ZodTypeProvider>();
  const tags = ['udp'];

  app.get('/v1/apps/:name/udp', {
    config: { auth: auth.R('AA', appFromParams) },
    schema: {
      tags,
      summary: "An app's UDP endpoints",
      params: nameParams,
      response: { 200: udpListSchema },
    },
    handler: async (req) => listUdp(ctx, principalOf(req).orgId, req.params.name),
  });

  app.post('/v1/apps/:name/udp', {
    config: { auth: auth.F('AW', appFromParams) },
    schema: {
      tags,
      summary: 'Open a public UDP endpoint',
      params: nameParams,
      body: createUdpBody,
      response: { 201: createdUdpSchema },
    },
    handler: async (req, reply) =>
      reply
        .code(201)
        .send(await createUdp(ctx, principalOf(req).orgId, req.params.name, req.body ?? {})),
  });

  app.delete('/v1/apps/:name/udp/:id', {
    config: { auth: auth.F('AW', appFromParams) },
    schema: { tags, summary: 'Close a UDP endpoint', params: udpIdParams },
    handler: async (req, reply) => {
      await deleteUdp(ctx, principalOf(req).orgId, req.params.name, req.params.id);
      return reply.code(204).send();
    },
  });
}
