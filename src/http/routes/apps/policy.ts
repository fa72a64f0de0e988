/** An app's network policy (spec 4.6). */
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import {
  networkPolicySchema,
  policyParams as nameParams,
  putNetworkPolicyBody,
} from '../../../contracts/network-policy.js';
import { getNetworkPolicy, putNetworkPolicy } from '../../../services/apps/network-policy.js';
import type { AppDeps } from '../../deps.js';
import { principalOf } from '../../plugins/auth.js';
import { appFromParams, auth } from '../../route-auth.js';

export function networkPolicyRoutes(root: FastifyInstance, { ctx }: AppDeps): void {
  const app = root.withTypeProvider<ZodTypeProvider>();

  app.get('/v1/apps/:name/policy/network', {
    config: { auth: auth.R('AA', appFromParams) },
    schema: {
      tags: ['policy'],
      summary: "An app's network policy",
      params: nameParams,
      response: { 200: networkPolicySchema },
    },
    handler: async (req) => getNetworkPolicy(ctx, principalOf(req).orgId, req.params.name),
  });

  app.put('/v1/apps/:name/policy/network', {
    config: { auth: auth.F('AW', appFromParams) },
    schema: {
      tags: ['policy'],
      summary: 'Set bandwidth and new-connection limits (null: none)',
      params: nameParams,
      body: putNetworkPolicyBody,
      response: { 200: networkPolicySchema },
    },
    handler: async (req) =>
      putNetworkPolicy(ctx, principalOf(req).orgId, req.params.name, req.body),
  });
}
