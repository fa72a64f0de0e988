/**
 * The keyless OAuth entrances (spec 4.2): client registration, authorize (into the
 * console's consent page) and the token endpoint. Each is limited per caller address in
 * PostgreSQL, shared by every replica (spec 8).
 */
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import {
  oauthErrorSchema,
  registerClientBody,
  registeredClientSchema,
  tokenAnswerSchema,
} from '../../../contracts/oauth.js';
import { badRequest, type ValidationIssue } from '../../../errors/api-error.js';
import { addressLimitKey } from '../../../host/address-key.js';
import { OutboundGuard } from '../../../host/outbound-guard.js';
import { authorize, type AuthorizeQuery } from '../../../oauth/authorize.js';
import { ClientDocuments } from '../../../oauth/client-metadata.js';
import { registerClient } from '../../../oauth/clients.js';
import { countEntranceHit, OAUTH_LIMITS } from '../../../oauth/rate-windows.js';
import { OAuthError, tokenRequest } from '../../../oauth/token.js';
import type { AppDeps } from '../../deps.js';

/** The query as single strings; every parameter sent twice is named (RFC 6749 3.1). */
function singleValued(query: unknown): AuthorizeQuery {
  const out: AuthorizeQuery = {};
  const issues: ValidationIssue[] = [];
  for (const [k, v] of Object.entries((query ?? {}) as Record<string, unknown>)) {
    if (typeof v === 'string') out[k] = v;
    else issues.push({ path: k, message: 'is given more than once' });
  }
  if (issues.length) throw badRequest(issues);
  return out;
}

/** A form body (RFC 6749 4.1.3), each parameter once; anything else is invalid_request. */
function formOf(contentType: string | undefined, body: unknown): AuthorizeQuery {
  if (!contentType?.toLowerCase().startsWith('application/x-www-form-urlencoded')) {
    throw new OAuthError('invalid_request', 'Send the parameters form-urlencoded.');
  }
  const params = new URLSearchParams(typeof body === 'string' ? body : '');
  const form: AuthorizeQuery = {};
  for (const key of new Set(params.keys())) {
    if (params.getAll(key).length > 1) {
      throw new OAuthError('invalid_request', `The parameter ${key} is given more than once.`);
    }
    form[key] = params.get(key)!;
  }
  return form;
}

/** OAuth's own answers are never cached (RFC 6749 5.1). */
function noStore(reply: FastifyReply): FastifyReply {
  return reply.header('cache-control', 'no-store').header('pragma', 'no-cache');
}

export function oauthEntranceRoutes(root: FastifyInstance, { ctx, config }: AppDeps): void {
  const app = root.withTypeProvider<ZodTypeProvider>();
  // Made on first use: registering routes reads no configuration. Metadata documents are
  // fetched for customers, so through the outbound guard, as image pulls are.
  let documents: ClientDocuments | undefined;
  const documentsOf = () =>
    (documents ??= new ClientDocuments(
      new OutboundGuard({
        allowPrivate: config.allowPrivateTargets,
        trusted: config.trustedRegistries,
      }),
    ));

  app.post('/v1/oauth/register', {
    config: { auth: 'public' },
    schema: {
      tags: ['oauth'],
      summary: 'Register a public OAuth client (RFC 7591; no key)',
      security: [],
      body: registerClientBody,
      response: { 201: registeredClientSchema },
    },
    // Counted before the body is judged: a flood of bad bodies is still a flood.
    preValidation: async (req) =>
      countEntranceHit(
        ctx.db,
        `oauth-register:${addressLimitKey(req.ip)}`,
        OAUTH_LIMITS.register,
        ctx.clock(),
      ),
    handler: async (req, reply) =>
      noStore(reply)
        .code(201)
        .send(await registerClient(ctx.db, req.body, req.ip, ctx.clock())),
  });

  app.get('/v1/oauth/authorize', {
    config: { auth: 'public' },
    schema: {
      tags: ['oauth'],
      summary: 'Start an OAuth login: redirects to the console’s consent page (no key)',
      description:
        'Query: response_type=code, client_id, redirect_uri, code_challenge, ' +
        'code_challenge_method=S256, state, scope, resource. Until the client and its ' +
        'redirect URI are known, errors are answered here (400 bad-request); after, they ' +
        'go back to the redirect URI with error, state and iss.',
      security: [],
    },
    handler: async (req, reply) => {
      await countEntranceHit(
        ctx.db,
        `oauth-authorize:${addressLimitKey(req.ip)}`,
        OAUTH_LIMITS.authorize,
        ctx.clock(),
      );
      const to = await authorize(
        ctx.db,
        documentsOf(),
        config.publicUrl,
        singleValued(req.query),
        req.ip,
        ctx.clock(),
      );
      return noStore(reply).redirect(to, 302);
    },
  });

  void root.register(async (scope) => {
    // The token endpoint takes forms (spec 1); its errors are OAuth's, so it parses itself.
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', { parseAs: 'string' }, (_req, body, done) => done(null, body));
    scope.post(
      '/v1/oauth/token',
      {
        config: { auth: 'public' },
        schema: {
          tags: ['oauth'],
          summary: 'Exchange a code, or refresh (form-urlencoded; no key)',
          description:
            'grant_type=authorization_code with code, code_verifier, client_id, redirect_uri ' +
            '(and resource); or grant_type=refresh_token with refresh_token and client_id. ' +
            'Errors: 400 with OAuth’s {error, error_description}.',
          security: [],
          response: { 200: tokenAnswerSchema, 400: oauthErrorSchema },
        },
      },
      async (req, reply) => {
        await countEntranceHit(
          ctx.db,
          `oauth-token:${addressLimitKey(req.ip)}`,
          OAUTH_LIMITS.token,
          ctx.clock(),
        );
        noStore(reply);
        try {
          const form = formOf(req.headers['content-type'], req.body);
          return reply.send(await tokenRequest(ctx, form));
        } catch (err) {
          if (err instanceof OAuthError) return reply.code(400).send(err.toBody());
          throw err;
        }
      },
    );
  });
}
