/** `GET /console/api/me`: who the calling key is, for the console's header and sign-out. */
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { meAnswerSchema } from '../../../contracts/console.js';
import { whoAmI } from '../../../services/console-me.js';
import type { AppDeps } from '../../deps.js';
import { principalOf } from '../../plugins/auth.js';
import { auth } from '../../route-auth.js';

export function consoleMeRoutes(root: FastifyInstance, { ctx }: AppDeps): void {
  const app = root.withTypeProvider<ZodTypeProvider>();
  app.get('/console/api/me', {
    // Any key may ask who it is (a read-only key too); agent tokens are not people.
    config: { auth: auth.R() },
    schema: {
      tags: ['console'],
      summary: 'The calling key, its person and organization',
      response: { 200: meAnswerSchema },
    },
    handler: async (req) => {
      const p = principalOf(req);
      return whoAmI(ctx, p.key, p.orgId);
    },
  });
}
