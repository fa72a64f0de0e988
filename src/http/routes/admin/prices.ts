/** The operator's price list (CONTRACT 2 `PUT /admin/v1/prices`; docs/billing.md). */
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { priceListSchema, pricesBody } from '../../../contracts/billing.js';
import { getPriceList, setPrices } from '../../../services/billing/prices.js';
import type { AppDeps } from '../../deps.js';

export function priceRoutes(root: FastifyInstance, { ctx }: AppDeps): void {
  const app = root.withTypeProvider<ZodTypeProvider>();
  const config = { auth: 'operator' as const };

  app.put('/admin/v1/prices', {
    config,
    schema: {
      tags: ['operator'],
      summary:
        'Set the price list: usage kind → integer micro-cents per unit; it applies from the next billing window',
      body: pricesBody,
      response: { 200: priceListSchema },
    },
    handler: async (req) => setPrices(ctx.db, req.body),
  });

  app.get('/admin/v1/prices', {
    config,
    schema: {
      tags: ['operator'],
      summary: 'The price list in force and the usage kinds',
      response: { 200: priceListSchema },
    },
    handler: async () => getPriceList(ctx.db),
  });
}
