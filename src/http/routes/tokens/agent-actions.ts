/** The audit of agent tokens (spec 4.1): every judged request with its verdict. */
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { agentActionSchema, listAgentActions } from '../../../services/agent-actions.js';
import type { AppDeps } from '../../app.js';
import { principalOf } from '../../plugins/auth.js';
import { auth } from '../../route-auth.js';

export function agentActionRoutes(root: FastifyInstance, { ctx }: AppDeps): void {
  const app = root.withTypeProvider<ZodTypeProvider>();
  app.get('/v1/agent-actions', {
    config: { auth: auth.F('AA') },
    schema: {
      tags: ['tokens'],
      summary: 'Agent actions, newest first',
      querystring: z.strictObject({
        limit: z.coerce.number().int().min(1).max(1000).default(100),
        token: z.string().min(1).max(64).optional(),
      }),
      response: { 200: z.array(agentActionSchema) },
    },
    handler: async (req) => listAgentActions(ctx.db, principalOf(req).orgId, req.query),
  });
}
