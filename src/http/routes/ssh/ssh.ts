/** SSH public keys, SSH tokens and the gateway answer (spec 4.1). */
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import {
  addSshKeyBody,
  createSshTokenBody,
  createdSshTokenSchema,
  sshGatewaySchema,
  sshIdParams as idParams,
  sshKeyListSchema,
  sshKeySchema,
  sshTokenListSchema,
} from '../../../contracts/ssh.js';
import {
  addSshKey,
  createSshToken,
  deleteSshKey,
  deleteSshToken,
  gatewayAnswer,
  listSshKeys,
  listSshTokens,
} from '../../../services/ssh.js';
import type { AppDeps } from '../../deps.js';
import { principalOf } from '../../plugins/auth.js';
import { appFromBody, auth } from '../../route-auth.js';

export function sshRoutes(root: FastifyInstance, { ctx, sshGateway }: AppDeps): void {
  const app = root.withTypeProvider<ZodTypeProvider>();

  app.get('/v1/ssh', {
    config: { auth: auth.R('AA') },
    schema: {
      tags: ['ssh'],
      summary: "The SSH gateway's address and host key",
      response: { 200: sshGatewaySchema },
    },
    handler: async () => gatewayAnswer(sshGateway),
  });

  app.get('/v1/ssh-keys', {
    config: { auth: auth.F('AA') },
    schema: { tags: ['ssh'], summary: 'SSH public keys', response: { 200: sshKeyListSchema } },
    handler: async (req) => listSshKeys(ctx, principalOf(req).orgId),
  });

  app.post('/v1/ssh-keys', {
    config: { auth: auth.F('A0') },
    schema: {
      tags: ['ssh'],
      summary: 'Add an SSH public key (ed25519, ecdsa, rsa ≥ 2048)',
      body: addSshKeyBody,
      response: { 201: sshKeySchema },
    },
    handler: async (req, reply) => {
      const p = principalOf(req);
      return reply
        .code(201)
        .send(
          await addSshKey(ctx, p.orgId, p.orgId === p.key.orgId ? p.key.userId : null, req.body),
        );
    },
  });

  app.delete('/v1/ssh-keys/:id', {
    config: { auth: auth.F('A0') },
    schema: { tags: ['ssh'], summary: 'Remove an SSH public key', params: idParams },
    handler: async (req, reply) => {
      await deleteSshKey(ctx, principalOf(req).orgId, req.params.id);
      return reply.code(204).send();
    },
  });

  app.get('/v1/ssh/tokens', {
    config: { auth: auth.F('AA') },
    schema: {
      tags: ['ssh'],
      summary: 'SSH tokens (never their values)',
      response: { 200: sshTokenListSchema },
    },
    handler: async (req) => listSshTokens(ctx, principalOf(req).orgId),
  });

  app.post('/v1/ssh/tokens', {
    config: { auth: auth.F('A0', appFromBody) },
    schema: {
      tags: ['ssh'],
      summary: 'Mint a short-lived SSH token for one app',
      body: createSshTokenBody,
      response: { 201: createdSshTokenSchema },
    },
    handler: async (req, reply) =>
      reply.code(201).send(await createSshToken(ctx, sshGateway, principalOf(req).orgId, req.body)),
  });

  app.delete('/v1/ssh/tokens/:id', {
    config: { auth: auth.F('A0') },
    schema: { tags: ['ssh'], summary: 'Revoke an SSH token', params: idParams },
    handler: async (req, reply) => {
      await deleteSshToken(ctx, principalOf(req).orgId, req.params.id);
      return reply.code(204).send();
    },
  });
}
