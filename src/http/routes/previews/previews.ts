/**
 * Preview environments (issue #26 item 3; docs/api.md "Previews"): make one (202, the
 * work goes on in a durable job), list, read, delete. Making and deleting one are
 * deploy-level (a `deploy` or `deploy:<app>` key may, as a CI's key would), reading
 * them `read`; agent tokens as for deploys.
 */
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { appParams } from '../../../contracts/apps.js';
import {
  createPreviewBody,
  previewListSchema,
  previewParams,
  previewSchema,
} from '../../../contracts/previews.js';
import {
  createPreview,
  deletePreview,
  getPreview,
  listPreviews,
} from '../../../services/previews/previews.js';
import type { AppDeps } from '../../deps.js';
import { principalOf } from '../../plugins/auth.js';
import { appFromParams, auth } from '../../route-auth.js';

const tags = ['previews'];

export function previewRoutes(root: FastifyInstance, { ctx }: AppDeps): void {
  const app = root.withTypeProvider<ZodTypeProvider>();

  app.post('/v1/apps/:name/previews', {
    config: { auth: auth.D('AW', appFromParams) },
    schema: {
      tags,
      summary: 'Make a preview environment of the app: `<app>--<preview>`',
      params: appParams,
      body: createPreviewBody,
      response: { 202: previewSchema },
    },
    handler: async (req, reply) =>
      reply
        .code(202)
        .send(await createPreview(ctx, principalOf(req).orgId, req.params.name, req.body)),
  });

  app.get('/v1/apps/:name/previews', {
    config: { auth: auth.R('AA', appFromParams) },
    schema: {
      tags,
      summary: "The app's previews",
      params: appParams,
      response: { 200: previewListSchema },
    },
    handler: async (req) => listPreviews(ctx, principalOf(req).orgId, req.params.name),
  });

  app.get('/v1/apps/:name/previews/:preview', {
    config: { auth: auth.R('AA', appFromParams) },
    schema: {
      tags,
      summary: 'One preview',
      params: previewParams,
      response: { 200: previewSchema },
    },
    handler: async (req) =>
      getPreview(ctx, principalOf(req).orgId, req.params.name, req.params.preview),
  });

  app.delete('/v1/apps/:name/previews/:preview', {
    config: { auth: auth.D('AW', appFromParams) },
    schema: {
      tags,
      summary: 'Delete a preview and exactly what it made (its app, machines, branches)',
      params: previewParams,
    },
    handler: async (req, reply) => {
      await deletePreview(ctx, principalOf(req).orgId, req.params.name, req.params.preview);
      return reply.code(204).send();
    },
  });
}
