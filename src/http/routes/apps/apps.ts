/** Apps (CONTRACT 3): create, list, read, delete. */
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import {
  appListSchema,
  appParams as nameParams,
  appSchema,
  createAppBody,
} from '../../../contracts/apps.js';
import { createApp, getApp, listApps } from '../../../services/apps/apps.js';
import type { AppDeps } from '../../deps.js';
import { principalOf } from '../../plugins/auth.js';
import { deleteApp } from '../../../services/apps/teardown.js';
import { appFromBodyField, appFromParams, auth } from '../../route-auth.js';

export function appRoutes(root: FastifyInstance, { ctx }: AppDeps): void {
  const app = root.withTypeProvider<ZodTypeProvider>();

  app.post('/v1/apps', {
    // The new app's name is the app the request concerns (for agent app lists).
    config: { auth: auth.F('AW', appFromBodyField('name')) },
    schema: {
      tags: ['apps'],
      summary: 'Create an app',
      body: createAppBody,
      response: { 201: appSchema },
    },
    handler: async (req, reply) =>
      reply.code(201).send(await createApp(ctx, principalOf(req).orgId, req.body.name)),
  });

  app.get('/v1/apps', {
    config: { auth: auth.R('AA') },
    schema: { tags: ['apps'], summary: 'List apps', response: { 200: appListSchema } },
    handler: async (req) => listApps(ctx, principalOf(req).orgId),
  });

  app.get('/v1/apps/:name', {
    config: { auth: auth.R('AA', appFromParams) },
    schema: {
      tags: ['apps'],
      summary: 'One app',
      params: nameParams,
      response: { 200: appSchema },
    },
    handler: async (req) => getApp(ctx, principalOf(req).orgId, req.params.name),
  });

  app.delete('/v1/apps/:name', {
    config: { auth: auth.F('AW', appFromParams) },
    schema: {
      tags: ['apps'],
      summary: 'Delete an app, its machines and secrets; detach its resources',
      params: nameParams,
    },
    handler: async (req, reply) => {
      await deleteApp(ctx, principalOf(req).orgId, req.params.name);
      return reply.code(204).send();
    },
  });
}
