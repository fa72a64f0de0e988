/**
 * Billing changes (spec 4.7, 5.7): top-up, auto-recharge and the provider's portal, for
 * console keys of admins only (`billing-console-only` otherwise), and the provider's
 * signed events, which carry no API key: their signature is the authentication
 * (services/payments/, docs/billing.md).
 */
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import {
  autoRechargeBody,
  creditAccountSchema,
  portalAnswerSchema,
  providerEventAnswerSchema,
  topupAnswerSchema,
  topupBody,
  topupParams,
  topupSchema,
} from '../../../contracts/billing.js';
import { receiveProviderEvent } from '../../../services/payments/events.js';
import { setAutoRecharge } from '../../../services/payments/recharge.js';
import { createTopup, getTopup, portalSession } from '../../../services/payments/topups.js';
import type { AppDeps } from '../../deps.js';
import { principalOf } from '../../plugins/auth.js';
import { auth, type RouteAuth } from '../../route-auth.js';

/** A full-access console key of an admin; agent tokens never (A0). */
const consoleAdmin: RouteAuth = { ...auth.F('A0'), consoleAdmin: true };

/** Stripe's events are small; anything larger is not one. */
const EVENT_BODY_LIMIT = 256 * 1024;

export function paymentRoutes(root: FastifyInstance, { ctx }: AppDeps): void {
  const app = root.withTypeProvider<ZodTypeProvider>();

  app.post('/v1/billing/topups', {
    config: { auth: consoleAdmin },
    schema: {
      tags: ['billing'],
      summary: "Start a top-up: a checkout session on the payment provider's page",
      body: topupBody,
      response: { 201: topupAnswerSchema },
    },
    handler: async (req, reply) =>
      reply.code(201).send(await createTopup(ctx, principalOf(req).orgId, req.body.amountCents)),
  });

  app.get('/v1/billing/topups/:id', {
    config: { auth: auth.F('AA') },
    schema: {
      tags: ['billing'],
      summary: 'Where a top-up stands (pending, paid, failed)',
      params: topupParams,
      response: { 200: topupSchema },
    },
    handler: async (req) => getTopup(ctx, principalOf(req).orgId, req.params.id),
  });

  app.put('/v1/billing/auto-recharge', {
    config: { auth: consoleAdmin },
    schema: {
      tags: ['billing'],
      summary: 'Set the auto-recharge rule',
      body: autoRechargeBody,
      response: { 200: creditAccountSchema },
    },
    handler: async (req) => setAutoRecharge(ctx, principalOf(req).orgId, req.body),
  });

  app.post('/v1/billing/portal', {
    config: { auth: consoleAdmin },
    schema: {
      tags: ['billing'],
      summary: "A session of the payment provider's customer portal",
      response: { 200: portalAnswerSchema },
    },
    handler: async (req) => portalSession(ctx, principalOf(req).orgId),
  });

  void root.register(async (scope) => {
    // The signature covers the exact bytes sent: the body is kept raw, not parsed.
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser(
      '*',
      { parseAs: 'buffer', bodyLimit: EVENT_BODY_LIMIT },
      (_req, body, done) => done(null, body),
    );
    scope.post('/v1/billing/stripe/events', {
      config: { auth: 'public' },
      schema: {
        tags: ['billing'],
        summary: "The payment provider's signed events (Stripe-Signature; no API key)",
        security: [],
        response: { 200: providerEventAnswerSchema },
      },
      handler: async (req) => {
        const sig = req.headers['stripe-signature'];
        const body = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
        return receiveProviderEvent(ctx, body, typeof sig === 'string' ? sig : undefined);
      },
    });
  });
}
