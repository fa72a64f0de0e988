/**
 * GET /admin/v1/ca: the platform CA's certificate (PEM), which signs the TLS certificates
 * of managed databases. Operators hand it to clients that verify the server
 * (`sslmode=verify-full`, `rediss://` with a CA file).
 */
import type { FastifyInstance } from 'fastify';
import type { AppDeps } from '../../deps.js';

export function caRoutes(root: FastifyInstance, deps: AppDeps): void {
  const ctx = deps.ctx;
  root.get('/admin/v1/ca', {
    config: { auth: 'operator' },
    schema: {
      tags: ['operator'],
      summary: "The platform CA certificate (PEM) that signs databases' TLS certificates",
    },
    handler: async (_req, reply) => {
      return reply.type('application/x-pem-file').send(await ctx.databases.caCertificate());
    },
  });
}
