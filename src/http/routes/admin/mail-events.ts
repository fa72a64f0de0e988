/**
 * The operator's mail events (CONTRACT 2 `POST /admin/v1/orgs/:id/mail-events`): what the
 * mail system would report, delivered to the organization's webhooks (docs/webhooks.md).
 */
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { orgIdParams } from '../../../contracts/orgs.js';
import { mailEventAnswerSchema, mailEventBody } from '../../../contracts/webhooks.js';
import { emitMailEvent } from '../../../services/webhooks/events.js';
import type { AppDeps } from '../../deps.js';

export function mailEventRoutes(root: FastifyInstance, { ctx }: AppDeps): void {
  const app = root.withTypeProvider<ZodTypeProvider>();

  app.post('/admin/v1/orgs/:id/mail-events', {
    config: { auth: 'operator' },
    schema: {
      tags: ['operator'],
      summary: 'Report a mail event: one delivery per enabled webhook of the org for its kind',
      params: orgIdParams,
      body: mailEventBody,
      response: { 202: mailEventAnswerSchema },
    },
    handler: async (req, reply) =>
      reply.code(202).send(await emitMailEvent(ctx, req.params.id, req.body)),
  });
}
