/** Volumes (spec 4.4): create, list, resize, delete, and detach from their app. */
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import {
  createVolumeBody,
  updateVolumeBody,
  volumeIdParams as params,
  volumeListSchema,
  volumeSchema,
} from '../../../contracts/volumes.js';
import { detachVolume } from '../../../services/volumes/attachments.js';
import {
  createVolume,
  deleteVolume,
  listVolumes,
  updateVolume,
} from '../../../services/volumes/volumes.js';
import type { AppDeps } from '../../deps.js';
import { principalOf } from '../../plugins/auth.js';
import { auth } from '../../route-auth.js';

const tags = ['volumes'];

export function volumeRoutes(root: FastifyInstance, { ctx }: AppDeps): void {
  const app = root.withTypeProvider<ZodTypeProvider>();

  app.post('/v1/volumes', {
    config: { auth: auth.F('AW') },
    schema: {
      tags,
      summary: 'Create a volume',
      body: createVolumeBody,
      response: { 201: volumeSchema },
    },
    handler: async (req, reply) =>
      reply.code(201).send(await createVolume(ctx, principalOf(req).orgId, req.body)),
  });

  app.get('/v1/volumes', {
    config: { auth: auth.R('AA') },
    schema: { tags, summary: 'List volumes', response: { 200: volumeListSchema } },
    handler: async (req) => listVolumes(ctx, principalOf(req).orgId),
  });

  app.patch('/v1/volumes/:id', {
    config: { auth: auth.F('AW') },
    schema: {
      tags,
      summary: 'Resize a volume or change how often a durable one is copied',
      params,
      body: updateVolumeBody,
      response: { 200: volumeSchema },
    },
    handler: async (req) => updateVolume(ctx, principalOf(req).orgId, req.params.id, req.body),
  });

  app.delete('/v1/volumes/:id', {
    config: { auth: auth.F('AW') },
    schema: { tags, summary: 'Delete a volume that is not attached', params },
    handler: async (req, reply) => {
      await deleteVolume(ctx, principalOf(req).orgId, req.params.id);
      return reply.code(204).send();
    },
  });

  app.delete('/v1/volumes/:id/attachment', {
    config: { auth: auth.F('AW') },
    schema: { tags, summary: 'Detach a volume from its app', params },
    handler: async (req, reply) => {
      await detachVolume(ctx, principalOf(req).orgId, { id: req.params.id });
      return reply.code(204).send();
    },
  });
}
