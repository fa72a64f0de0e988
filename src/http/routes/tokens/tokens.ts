/** API keys (spec 4.1): create, list, revoke. */
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import {
  createKeyBody,
  createdKeySchema,
  keyIdParams,
  keyListSchema,
} from '../../../contracts/tokens.js';
import { listKeys, mintKey, revokeKey } from '../../../services/keys.js';
import type { AppDeps } from '../../deps.js';
import { principalOf } from '../../plugins/auth.js';
import { auth } from '../../route-auth.js';

export function tokenRoutes(root: FastifyInstance, { ctx }: AppDeps): void {
  const app = root.withTypeProvider<ZodTypeProvider>();

  app.post('/v1/tokens', {
    config: { auth: auth.F('A0') },
    schema: {
      tags: ['tokens'],
      summary: 'Create an API key; its value is in this answer only',
      body: createKeyBody,
      response: { 201: createdKeySchema },
    },
    handler: async (req, reply) => {
      const { key, orgId } = principalOf(req);
      // Under delegation the new key belongs to the managed org and to nobody there.
      const creator = {
        orgId,
        userId: orgId === key.orgId ? key.userId : null,
        expiresAt: key.expiresAt,
      };
      const created = await mintKey(ctx.db, ctx.clock(), creator, req.body);
      await ctx.auth.keysChanged(orgId);
      return reply.code(201).send(created);
    },
  });

  app.get('/v1/tokens', {
    config: { auth: auth.F('AA') },
    schema: {
      tags: ['tokens'],
      summary: 'List API keys (never their values)',
      response: { 200: keyListSchema },
    },
    handler: async (req) => listKeys(ctx, principalOf(req).orgId),
  });

  app.delete('/v1/tokens/:id', {
    config: { auth: auth.F('A0') },
    schema: {
      tags: ['tokens'],
      summary: 'Revoke an API key at once',
      params: keyIdParams,
    },
    handler: async (req, reply) => {
      await revokeKey(ctx, principalOf(req).orgId, req.params.id);
      return reply.code(204).send();
    },
  });
}
