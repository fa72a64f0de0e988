/** GET /admin/v1/hosts (CONTRACT 2): hosts with their capacity and what runs on them. */
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { hostListSchema } from '../../../contracts/orgs.js';
import { listHosts } from '../../../services/hosts.js';
import type { AppDeps } from '../../deps.js';

export function hostRoutes(root: FastifyInstance, { ctx, pool }: AppDeps): void {
  const app = root.withTypeProvider<ZodTypeProvider>();
  app.get('/admin/v1/hosts', {
    config: { auth: 'operator' },
    schema: {
      tags: ['operator'],
      summary: 'Hosts, their storage pool and capacity, and what runs on them',
      response: { 200: hostListSchema },
    },
    handler: async () => listHosts(ctx, pool),
  });
}
