/** Per-app secrets (spec 4.10): names and metadata out, values in, never back. */
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import {
  putSecretsAnswerSchema,
  putSecretsBody,
  secretAppParams as nameParams,
  secretKeyParams,
  secretListSchema,
} from '../../../contracts/secrets.js';
import { rollForSecrets } from '../../../services/deploys/secret-roll.js';
import { deleteSecret, listSecrets, putSecrets } from '../../../services/secrets.js';
import type { AppDeps } from '../../deps.js';
import { principalOf } from '../../plugins/auth.js';
import { appFromParams, auth } from '../../route-auth.js';

export function secretRoutes(root: FastifyInstance, { ctx }: AppDeps): void {
  const app = root.withTypeProvider<ZodTypeProvider>();

  app.get('/v1/apps/:name/secrets', {
    config: { auth: auth.DorR('AA', appFromParams) },
    schema: {
      tags: ['secrets'],
      summary: "An app's secrets (names and metadata, never values)",
      params: nameParams,
      response: { 200: secretListSchema },
    },
    handler: async (req) => listSecrets(ctx, principalOf(req).orgId, req.params.name),
  });

  app.put('/v1/apps/:name/secrets', {
    config: { auth: auth.D('AW', appFromParams) },
    schema: {
      tags: ['secrets'],
      summary: 'Set secrets and build flags',
      params: nameParams,
      body: putSecretsBody,
      response: { 200: putSecretsAnswerSchema },
    },
    handler: async (req) => {
      const orgId = principalOf(req).orgId;
      return putSecrets(ctx, orgId, req.params.name, req.body, rollForSecrets(ctx, orgId));
    },
  });

  app.delete('/v1/apps/:name/secrets/:key', {
    config: { auth: auth.D('AW', appFromParams) },
    schema: {
      tags: ['secrets'],
      summary: 'Remove a secret',
      params: secretKeyParams,
    },
    handler: async (req, reply) => {
      await deleteSecret(ctx, principalOf(req).orgId, req.params.name, req.params.key);
      return reply.code(204).send();
    },
  });
}
