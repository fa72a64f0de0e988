/** Billing reads (spec 4.7): the credit account, its ledger, and metered usage. */
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import {
  creditAccountSchema,
  ledgerPageSchema,
  ledgerQuery,
  previewQuery,
  previewSchema,
  usageListSchema,
  usageQuery,
} from '../../../contracts/billing.js';
import { getCreditAccount, ledgerOf } from '../../../services/billing.js';
import { previewOf } from '../../../services/billing/preview.js';
import { listUsage } from '../../../services/usage.js';
import type { AppDeps } from '../../deps.js';
import { principalOf } from '../../plugins/auth.js';
import { auth } from '../../route-auth.js';

export function billingRoutes(root: FastifyInstance, { ctx }: AppDeps): void {
  const app = root.withTypeProvider<ZodTypeProvider>();

  app.get('/v1/billing/credits', {
    config: { auth: auth.F('AA') },
    schema: {
      tags: ['billing'],
      summary: 'The credit account',
      response: { 200: creditAccountSchema },
    },
    handler: async (req) => getCreditAccount(ctx.db, principalOf(req).orgId),
  });

  app.get('/v1/billing/ledger', {
    config: { auth: auth.F('AA') },
    schema: {
      tags: ['billing'],
      summary: 'Ledger entries, newest first',
      querystring: ledgerQuery,
      response: { 200: ledgerPageSchema },
    },
    handler: async (req) => ledgerOf(ctx, principalOf(req).orgId, req.query.limit),
  });

  app.get('/v1/usage', {
    config: { auth: auth.F('AA') },
    schema: {
      tags: ['billing'],
      summary: 'Metered usage events of a period (default: the last 30 days), oldest first',
      querystring: usageQuery,
      response: { 200: usageListSchema },
    },
    handler: async (req) => listUsage(ctx, principalOf(req).orgId, req.query),
  });

  app.get('/v1/billing/preview', {
    config: { auth: auth.F('AA') },
    schema: {
      tags: ['billing'],
      summary: 'What the usage of a period costs, priced as booking prices it',
      querystring: previewQuery,
      response: { 200: previewSchema },
    },
    handler: async (req) =>
      previewOf(ctx, principalOf(req).orgId, new Date(req.query.from), new Date(req.query.to)),
  });
}
