/** Custom domains of an app (spec 4.8), and the ACME HTTP-01 answers (CONTRACT 6). */
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import {
  acmeChallengeParams,
  addDomainBody,
  domainCheckAnswerSchema,
  domainListSchema,
  domainParams,
  domainSchema,
  redirectBody,
} from '../../../contracts/domains.js';
import { appParams } from '../../../contracts/apps.js';
import { httpChallengeAnswer } from '../../../services/domains/certificates.js';
import {
  addDomain,
  checkDomain,
  deleteDomain,
  listDomains,
  setRedirect,
} from '../../../services/domains/domains.js';
import type { AppDeps } from '../../deps.js';
import { principalOf } from '../../plugins/auth.js';
import { appFromParams, auth } from '../../route-auth.js';

export function domainRoutes(root: FastifyInstance, { ctx }: AppDeps): void {
  const app = root.withTypeProvider<ZodTypeProvider>();
  const tags = ['domains'];

  app.post('/v1/apps/:name/domains', {
    config: { auth: auth.F('AW', appFromParams) },
    schema: {
      tags,
      summary: 'Add a custom domain (the answer names the DNS records to set)',
      params: appParams,
      body: addDomainBody,
      response: { 201: domainSchema },
    },
    handler: async (req, reply) =>
      reply
        .code(201)
        .send(await addDomain(ctx, principalOf(req).orgId, req.params.name, req.body.domain)),
  });

  app.get('/v1/apps/:name/domains', {
    config: { auth: auth.R('AA', appFromParams) },
    schema: {
      tags,
      summary: "An app's custom domains",
      params: appParams,
      response: { 200: domainListSchema },
    },
    handler: async (req) => listDomains(ctx, principalOf(req).orgId, req.params.name),
  });

  app.post('/v1/apps/:name/domains/:domain/check', {
    config: { auth: auth.F('AW', appFromParams) },
    schema: {
      tags,
      summary: 'Queue a check of the DNS records and the certificate',
      params: domainParams,
      response: { 200: domainCheckAnswerSchema },
    },
    handler: async (req) =>
      checkDomain(ctx, principalOf(req).orgId, req.params.name, req.params.domain),
  });

  app.put('/v1/apps/:name/domains/:domain/redirect', {
    config: { auth: auth.F('AW', appFromParams) },
    schema: {
      tags,
      summary: 'Answer the domain with a 308 to another hostname of the app (null clears)',
      params: domainParams,
      body: redirectBody,
      response: { 200: domainSchema },
    },
    handler: async (req) =>
      setRedirect(ctx, principalOf(req).orgId, req.params.name, req.params.domain, req.body.to),
  });

  app.delete('/v1/apps/:name/domains/:domain', {
    config: { auth: auth.F('AW', appFromParams) },
    schema: { tags, summary: 'Remove a custom domain', params: domainParams },
    handler: async (req, reply) => {
      await deleteDomain(ctx, principalOf(req).orgId, req.params.name, req.params.domain);
      return reply.code(204).send();
    },
  });

  // The ACME CA fetches HTTP-01 answers here, on whichever replica it reaches.
  app.get('/.well-known/acme-challenge/:token', {
    config: { auth: 'public' },
    schema: { hide: true, params: acmeChallengeParams },
    handler: async (req, reply) => {
      const answer = await httpChallengeAnswer(ctx, req.params.token);
      if (answer === undefined)
        return reply.code(404).send({ error: 'No such challenge.', code: 'not-found' });
      return reply.type('text/plain').send(answer);
    },
  });
}
