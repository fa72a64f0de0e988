/** The audit of agent tokens (spec 4.1): every judged request with its verdict. */
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { agentActionListSchema, agentActionQuery } from '../../../contracts/agent-actions.js';
import { listAgentActions } from '../../../services/agent-actions.js';
import type { AppDeps } from '../../deps.js';
import { principalOf } from '../../plugins/auth.js';
import { auth } from '../../route-auth.js';

export function agentActionRoutes(root: FastifyInstance, { ctx }: AppDeps): void {
  const app = root.withTypeProvider<ZodTypeProvider>();
  app.get('/v1/agent-actions', {
    config: { auth: auth.F('AA') },
    schema: {
      tags: ['tokens'],
      summary: 'Agent actions, newest first',
      querystring: agentActionQuery,
      response: { 200: agentActionListSchema },
    },
    handler: async (req) => listAgentActions(ctx.db, principalOf(req).orgId, req.query),
  });
}
