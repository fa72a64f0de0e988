/**
 * The web console at `/console`: server-rendered pages (pages/), htmx for the live parts,
 * xterm.js for the terminal. Every action is a call of a `/v1` route with the signed-in
 * person's console key (api.ts); this file only wires the pieces into one Fastify scope:
 * form parsing, security headers, static assets, sign-in, the page families and the
 * terminal relay. See README.md.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Assets } from './assets.js';
import { PAGE_FAMILIES } from './pages/registry.js';
import { ConsoleRouter, redirect, type ConsoleEnv } from './router.js';
import { signInRoutes } from './sign-in.js';
import { FailedSignIns } from './sign-in-limit.js';
import { terminalRelay } from './terminal-relay.js';

export interface ConsoleOptions {
  /** Read at each request: with port 0 (tests) it is known only once listening. */
  config: { publicUrl: string };
  failedSignIns?: FailedSignIns;
}

export const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "form-action 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
].join('; ');

const FORM_BODY_LIMIT = 256 * 1024;

function securityHeaders(req: FastifyRequest, reply: FastifyReply, payload: unknown) {
  reply.header('content-security-policy', CONTENT_SECURITY_POLICY);
  reply.header('x-content-type-options', 'nosniff');
  reply.header('referrer-policy', 'same-origin');
  reply.header('x-frame-options', 'DENY');
  // Pages carry a person's data and a CSRF token: never kept by a shared cache.
  if (!req.url.startsWith('/console/assets/')) reply.header('cache-control', 'no-store');
  return Promise.resolve(payload);
}

export async function consolePlugin(app: FastifyInstance, opts: ConsoleOptions): Promise<void> {
  const assets = new Assets();
  const nav = PAGE_FAMILIES.flatMap((f) => f.nav);
  const env: ConsoleEnv = {
    app,
    assets,
    nav,
    get publicUrl() {
      return opts.config.publicUrl;
    },
  };
  await app.register(async (scope) => {
    scope.addContentTypeParser(
      'application/x-www-form-urlencoded',
      { parseAs: 'string', bodyLimit: FORM_BODY_LIMIT },
      (_req, body, done) => done(null, Object.fromEntries(new URLSearchParams(body as string))),
    );
    scope.addHook('onSend', securityHeaders);
    // Pages are not API routes: they stay out of the OpenAPI document.
    scope.addHook('onRoute', (route) => {
      route.schema = { ...route.schema, hide: true };
    });

    scope.get<{ Params: { version: string; name: string } }>(
      '/console/assets/:version/:name',
      { config: { auth: 'public' } },
      async (req, reply) => {
        const asset = assets.get(req.params.version, req.params.name);
        if (!asset) return reply.code(404).type('text/plain').send('no such asset');
        return reply
          .type(asset.type)
          .header('cache-control', 'public, max-age=31536000, immutable')
          .send(asset.body);
      },
    );

    const router = new ConsoleRouter(scope, env);
    signInRoutes(scope, router, opts.failedSignIns ?? new FailedSignIns());
    router.page('/console', async () => redirect(nav[0]?.href ?? '/console/sign-in'));
    for (const family of PAGE_FAMILIES) family.register(router);
    terminalRelay(scope, router);
  });
}
