/**
 * Deploys, releases and rollback (CONTRACT 7; spec 7.4 for rollback's codes).
 * docs/api.md ("Deploys and releases") documents the answers.
 */
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { appParams } from '../../../contracts/apps.js';
import {
  createDeployBody,
  deployIdParams,
  deployListSchema,
  deploySchema,
  releaseListSchema,
  rollbackBody,
} from '../../../contracts/deploys.js';
import { createDeploy, getDeploy, listDeploys } from '../../../services/deploys/deploys.js';
import { listReleases } from '../../../services/deploys/releases.js';
import { rollback } from '../../../services/deploys/rollback.js';
import { appOfRecord } from '../../app-of-record.js';
import type { AppDeps } from '../../deps.js';
import { principalOf } from '../../plugins/auth.js';
import { appFromParams, auth } from '../../route-auth.js';

const tags = ['deploys'];

export function deployRoutes(root: FastifyInstance, { ctx }: AppDeps): void {
  const app = root.withTypeProvider<ZodTypeProvider>();

  app.post('/v1/apps/:name/deploys', {
    config: { auth: auth.D('AW', appFromParams) },
    schema: {
      tags,
      summary: 'Deploy an image (or `build:<id>`) to the app',
      params: appParams,
      body: createDeployBody,
      response: { 202: deploySchema },
    },
    handler: async (req, reply) =>
      reply
        .code(202)
        .send(await createDeploy(ctx, principalOf(req).orgId, req.params.name, req.body)),
  });

  app.get('/v1/apps/:name/deploys', {
    config: { auth: auth.R('AA', appFromParams) },
    schema: {
      tags,
      summary: "An app's deploys, newest first",
      params: appParams,
      response: { 200: deployListSchema },
    },
    handler: async (req) => listDeploys(ctx, principalOf(req).orgId, req.params.name),
  });

  app.get('/v1/deploys/:id', {
    config: { auth: { ...auth.R('AA'), appOf: appOfRecord(ctx, 'deploys') } },
    schema: {
      tags,
      summary: 'One deploy',
      params: deployIdParams,
      response: { 200: deploySchema },
    },
    handler: async (req) => getDeploy(ctx, principalOf(req).orgId, req.params.id),
  });

  app.get('/v1/apps/:name/releases', {
    config: { auth: auth.R('AA', appFromParams) },
    schema: {
      tags,
      summary: "An app's releases, newest first",
      params: appParams,
      response: { 200: releaseListSchema },
    },
    handler: async (req) => listReleases(ctx, principalOf(req).orgId, req.params.name),
  });

  app.post('/v1/apps/:name/rollback', {
    config: { auth: auth.D('AW', appFromParams) },
    schema: {
      tags,
      summary: 'Deploy a recorded release again (default: the one live before the current)',
      params: appParams,
      body: rollbackBody,
      response: { 202: deploySchema },
    },
    handler: async (req, reply) =>
      reply
        .code(202)
        .send(await rollback(ctx, principalOf(req).orgId, req.params.name, req.body ?? {})),
  });
}
