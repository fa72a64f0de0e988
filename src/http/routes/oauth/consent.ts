/**
 * The signed-in side of OAuth (spec 4.2): consent lookup and decide, which the console's
 * consent page calls with the person's key, and the grants a person gave, listed and
 * revocable (pier's routes; docs/api.md).
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import {
  consentDecideBody,
  consentDecidedSchema,
  consentLookupBody,
  consentLookupSchema,
  grantIdParams,
  grantListSchema,
} from '../../../contracts/oauth.js';
import { decideConsent, type Decider, lookupConsent } from '../../../oauth/consent.js';
import { listGrants, revokeGrant } from '../../../oauth/grants.js';
import type { AppDeps } from '../../deps.js';
import { principalOf } from '../../plugins/auth.js';
import { auth } from '../../route-auth.js';

/** The person deciding: under delegation the key's person does not belong to the org. */
function deciderOf(req: FastifyRequest): Decider {
  const p = principalOf(req);
  return { orgId: p.orgId, userId: p.orgId === p.key.orgId ? p.key.userId : null };
}

export function oauthConsentRoutes(root: FastifyInstance, { ctx }: AppDeps): void {
  const app = root.withTypeProvider<ZodTypeProvider>();

  app.post('/v1/oauth/consent/lookup', {
    config: { auth: auth.F('A0') },
    schema: {
      tags: ['oauth'],
      summary: 'What a pending OAuth login asks for, and the choices',
      body: consentLookupBody,
      response: { 200: consentLookupSchema },
    },
    handler: async (req) => lookupConsent(ctx, deciderOf(req), req.body.requestId),
  });

  app.post('/v1/oauth/consent/decide', {
    config: { auth: auth.F('A0') },
    schema: {
      tags: ['oauth'],
      summary: 'Approve (with what the client may do) or deny an OAuth login',
      body: consentDecideBody,
      response: { 200: consentDecidedSchema },
    },
    handler: async (req) => decideConsent(ctx, deciderOf(req), req.body),
  });

  app.get('/v1/oauth/grants', {
    config: { auth: auth.F('AA') },
    schema: {
      tags: ['oauth'],
      summary: 'The grants in force that people of the organization gave OAuth clients',
      response: { 200: grantListSchema },
    },
    handler: async (req) => listGrants(ctx, principalOf(req).orgId),
  });

  app.delete('/v1/oauth/grants/:id', {
    config: { auth: auth.F('A0') },
    schema: {
      tags: ['oauth'],
      summary: 'Revoke a grant with its access and refresh tokens',
      params: grantIdParams,
    },
    handler: async (req, reply) => {
      await revokeGrant(ctx, principalOf(req).orgId, req.params.id);
      return reply.code(204).send();
    },
  });
}
