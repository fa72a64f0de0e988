/** The operator API (CONTRACT 2): organizations, people, grants, suspension, limits. */
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { grantBody, ledgerEntrySchema } from '../../../contracts/billing.js';
import {
  createOrgBody,
  createUserBody,
  createdOrgSchema,
  createdUserSchema,
  limitsBody,
  orgIdParams as idParams,
  orgListSchema,
  orgSchema,
} from '../../../contracts/orgs.js';
import { grantCredit } from '../../../services/billing.js';
import {
  createOrg,
  createUser,
  getOrg,
  listOrgs,
  setLimits,
  setSuspended,
} from '../../../services/orgs.js';
import type { AppDeps } from '../../deps.js';

export function adminRoutes(root: FastifyInstance, { ctx }: AppDeps): void {
  const app = root.withTypeProvider<ZodTypeProvider>();
  const config = { auth: 'operator' as const };

  app.post('/admin/v1/orgs', {
    config,
    schema: {
      tags: ['operator'],
      summary: 'Create an organization with its first admin and a full-access key',
      body: createOrgBody,
      response: { 201: createdOrgSchema },
    },
    handler: async (req, reply) => reply.code(201).send(await createOrg(ctx, req.body)),
  });

  app.get('/admin/v1/orgs', {
    config,
    schema: {
      tags: ['operator'],
      summary: 'Every organization',
      response: { 200: orgListSchema },
    },
    handler: async () => listOrgs(ctx.db),
  });

  app.get('/admin/v1/orgs/:id', {
    config,
    schema: {
      tags: ['operator'],
      summary: 'One organization',
      params: idParams,
      response: { 200: orgSchema },
    },
    handler: async (req) => getOrg(ctx.db, req.params.id),
  });

  app.post('/admin/v1/orgs/:id/users', {
    config,
    schema: {
      tags: ['operator'],
      summary: 'Add a person to an organization',
      params: idParams,
      body: createUserBody,
      response: { 201: createdUserSchema },
    },
    handler: async (req, reply) =>
      reply.code(201).send(await createUser(ctx, req.params.id, req.body)),
  });

  app.post('/admin/v1/orgs/:id/grants', {
    config,
    schema: {
      tags: ['operator'],
      summary: 'Grant credit',
      params: idParams,
      body: grantBody,
      response: { 201: ledgerEntrySchema },
    },
    handler: async (req, reply) =>
      reply.code(201).send(await grantCredit(ctx, req.params.id, req.body)),
  });

  for (const action of ['suspend', 'unsuspend'] as const) {
    app.post(`/admin/v1/orgs/:id/${action}`, {
      config,
      schema: {
        tags: ['operator'],
        summary: `${action} an organization`,
        params: idParams,
        response: { 200: orgSchema },
      },
      handler: async (req) => {
        return setSuspended(ctx, req.params.id, action === 'suspend');
      },
    });
  }

  app.put('/admin/v1/orgs/:id/limits', {
    config,
    schema: {
      tags: ['operator'],
      summary: 'Set the organization limits (null = unlimited, absent = unchanged)',
      params: idParams,
      body: limitsBody,
      response: { 200: orgSchema },
    },
    handler: async (req) => setLimits(ctx, req.params.id, req.body),
  });
}
