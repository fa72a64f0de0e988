/** App protection (spec 4.6): mode, rotate, signed links, access tokens. */
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import {
  accessTokenSchema,
  createdLinkSchema,
  createLinkBody,
  createTokenBody,
  linkParams,
  protectionParams as nameParams,
  protectionSchema,
  setProtectionBody,
} from '../../../contracts/protection.js';
import {
  createLink,
  createToken,
  deleteLink,
  getProtection,
  rotateProtection,
  setProtection,
} from '../../../services/apps/protection.js';
import type { AppDeps } from '../../deps.js';
import { principalOf } from '../../plugins/auth.js';
import { appFromParams, auth } from '../../route-auth.js';

export function protectionRoutes(root: FastifyInstance, { ctx }: AppDeps): void {
  const app = root.withTypeProvider<ZodTypeProvider>();
  const tags = ['protection'];

  app.get('/v1/apps/:name/protection', {
    config: { auth: auth.R('AA', appFromParams) },
    schema: {
      tags,
      summary: "An app's protection",
      params: nameParams,
      response: { 200: protectionSchema },
    },
    handler: async (req) => getProtection(ctx, principalOf(req).orgId, req.params.name),
  });

  app.put('/v1/apps/:name/protection', {
    config: { auth: auth.F('AW', appFromParams) },
    schema: {
      tags,
      summary: 'Set the protection mode (public, password, signed)',
      params: nameParams,
      body: setProtectionBody,
      response: { 200: protectionSchema },
    },
    handler: async (req) => setProtection(ctx, principalOf(req).orgId, req.params.name, req.body),
  });

  app.post('/v1/apps/:name/protection/rotate', {
    config: { auth: auth.F('AW', appFromParams) },
    schema: {
      tags,
      summary: 'Rotate the password or signing secret',
      params: nameParams,
      response: { 200: protectionSchema },
    },
    handler: async (req) => rotateProtection(ctx, principalOf(req).orgId, req.params.name),
  });

  app.post('/v1/apps/:name/protection/links', {
    config: { auth: auth.F('AW', appFromParams) },
    schema: {
      tags,
      summary: 'Create a signed link',
      params: nameParams,
      body: createLinkBody,
      response: { 201: createdLinkSchema },
    },
    handler: async (req, reply) =>
      reply
        .code(201)
        .send(await createLink(ctx, principalOf(req).orgId, req.params.name, req.body)),
  });

  app.delete('/v1/apps/:name/protection/links/:id', {
    config: { auth: auth.F('AW', appFromParams) },
    schema: { tags, summary: 'Revoke a signed link', params: linkParams },
    handler: async (req, reply) => {
      await deleteLink(ctx, principalOf(req).orgId, req.params.name, req.params.id);
      return reply.code(204).send();
    },
  });

  app.post('/v1/apps/:name/protection/tokens', {
    config: { auth: auth.F('AW', appFromParams) },
    schema: {
      tags,
      summary: 'Mint an access token (signed mode)',
      params: nameParams,
      body: createTokenBody,
      response: { 201: accessTokenSchema },
    },
    handler: async (req, reply) =>
      reply
        .code(201)
        .send(await createToken(ctx, principalOf(req).orgId, req.params.name, req.body ?? {})),
  });
}
