/** Console sign-in (CONTRACT 4): email and password give a short-lived console key. */
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { signInAnswerSchema, signInBody } from '../../../contracts/console.js';
import { addressLimitKey } from '../../../host/address-key.js';
import { signIn } from '../../../services/console-sign-in.js';
import { LOGIN_LIMIT } from '../../../services/rate-limit.js';
import type { AppDeps } from '../../deps.js';

export function consoleRoutes(root: FastifyInstance, { ctx, rateLimiter }: AppDeps): void {
  const app = root.withTypeProvider<ZodTypeProvider>();
  app.post('/console/api/sign-in', {
    config: { auth: 'public' },
    schema: {
      tags: ['console'],
      summary: 'Sign in to the console',
      security: [],
      body: signInBody,
      response: { 200: signInAnswerSchema },
    },
    handler: async (req) => {
      rateLimiter.hit(
        `sign-in:${addressLimitKey(req.ip)}`,
        LOGIN_LIMIT.limit,
        LOGIN_LIMIT.windowMs,
      );
      return signIn(ctx, req.body);
    },
  });
}
