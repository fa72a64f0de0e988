/** Webhooks (spec 4.11, 6; docs/webhooks.md): the secret once, deliveries with attempts. */
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import {
  createWebhookBody,
  createdWebhookSchema,
  deliveriesQuery,
  deliveryListSchema,
  webhookIdParams as idParams,
  webhookListSchema,
  webhookSchema,
} from '../../../contracts/webhooks.js';
import { badRequest } from '../../../errors/api-error.js';
import {
  createWebhook,
  deleteWebhook,
  getWebhook,
  listDeliveries,
  listWebhooks,
  webhookUrlIssue,
} from '../../../services/webhooks/webhooks.js';
import type { ServiceContext } from '../../../services/context.js';
import type { AppDeps } from '../../deps.js';
import { principalOf } from '../../plugins/auth.js';
import { toIssues } from '../../plugins/validation.js';
import { auth } from '../../route-auth.js';

/**
 * A body the schema refuses is answered with the guard's word on its URL as well, so
 * that every problem comes back at once; a body the schema takes has its URL judged by
 * the service.
 */
function allIssuesAtOnce(ctx: ServiceContext) {
  return async (req: { body: unknown }) => {
    const parsed = createWebhookBody.safeParse(req.body, { reportInput: true });
    if (parsed.success) return;
    const issues = toIssues(parsed.error.issues);
    const url = (req.body as { url?: unknown } | undefined)?.url;
    if (typeof url === 'string' && !issues.some((i) => i.path === 'url')) {
      const issue = await webhookUrlIssue(ctx, url);
      if (issue) issues.push(issue);
    }
    throw badRequest(issues);
  };
}

export function webhookRoutes(root: FastifyInstance, { ctx }: AppDeps): void {
  const app = root.withTypeProvider<ZodTypeProvider>();

  app.post('/v1/webhooks', {
    config: { auth: auth.F('A0') },
    preValidation: allIssuesAtOnce(ctx),
    schema: {
      tags: ['webhooks'],
      summary: 'Create a webhook; the answer carries its signing secret, shown only here',
      body: createWebhookBody,
      response: { 201: createdWebhookSchema },
    },
    handler: async (req, reply) =>
      reply.code(201).send(await createWebhook(ctx, principalOf(req).orgId, req.body)),
  });

  app.get('/v1/webhooks', {
    config: { auth: auth.R('AA') },
    schema: {
      tags: ['webhooks'],
      summary: "The organization's webhooks",
      response: { 200: webhookListSchema },
    },
    handler: async (req) => listWebhooks(ctx, principalOf(req).orgId),
  });

  app.get('/v1/webhooks/:id', {
    config: { auth: auth.R('AA') },
    schema: {
      tags: ['webhooks'],
      summary: 'One webhook',
      params: idParams,
      response: { 200: webhookSchema },
    },
    handler: async (req) => getWebhook(ctx, principalOf(req).orgId, req.params.id),
  });

  app.get('/v1/webhooks/:id/deliveries', {
    config: { auth: auth.R('AD') },
    schema: {
      tags: ['webhooks'],
      summary: "A webhook's newest deliveries, each with every attempt",
      params: idParams,
      querystring: deliveriesQuery,
      response: { 200: deliveryListSchema },
    },
    handler: async (req) =>
      listDeliveries(ctx, principalOf(req).orgId, req.params.id, req.query.limit),
  });

  app.delete('/v1/webhooks/:id', {
    config: { auth: auth.F('A0') },
    schema: {
      tags: ['webhooks'],
      summary: 'Delete a webhook; its pending deliveries are not sent',
      params: idParams,
    },
    handler: async (req, reply) => {
      await deleteWebhook(ctx, principalOf(req).orgId, req.params.id);
      return reply.code(204).send();
    },
  });
}
