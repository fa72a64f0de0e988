/**
 * Builds the HTTP app from a config and services: no globals, so a test can build many
 * side by side. Every route family registers itself from routes/; the plugins give them
 * auth, validation, errors, request ids and metrics.
 */
import Fastify, { type FastifyInstance } from 'fastify';
import swagger from '@fastify/swagger';
import websocket from '@fastify/websocket';
import { Registry } from 'prom-client';
import type { AppDeps } from './deps.js';
import { installAuth } from './plugins/auth.js';
import { installCreditBlock } from './plugins/credit-block.js';
import { answerClientError, installErrors, type ErrorRenderer } from './plugins/errors.js';
import { innerUrl } from './plugins/inner-calls.js';
import { installObservability, newRequestId } from './plugins/observability.js';
import { documentTransform, installOpenApiAnswers } from './plugins/openapi-answers.js';
import { redactingLogger } from './plugins/redact.js';
import { installValidation } from './plugins/validation.js';
import { registerRoutes } from './routes/index.js';
import { consolePlugin } from '../console/index.js';
import { s3Gateway } from './s3/plugin.js';
import { AppProxy, proxyPlugin } from '../proxy/index.js';
import { MachineTargets } from '../proxy/machine-targets.js';
import { ProtectionGate } from '../proxy/protection.js';
import { edgeResolver } from '../services/domains/hosts.js';

declare module 'fastify' {
  interface FastifyInstance {
    /** The app proxy, which the TLS edge (platform.ts) hands its requests to as well. */
    appProxy: AppProxy;
  }
}

export async function buildApp(deps: AppDeps): Promise<FastifyInstance> {
  // Set below, once the app exists: errors found before routing go through the one renderer.
  const late: { renderError?: ErrorRenderer } = {};
  const app = Fastify({
    // Request and error logs go through the redaction rules: no secrets in URLs, headers or bodies.
    loggerInstance: redactingLogger(deps.logger),
    genReqId: (req) => newRequestId(req.headers['x-request-id']),
    bodyLimit: deps.config.bodyLimitBytes,
    trustProxy: false,
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: 1024 },
    forceCloseConnections: 'idle',
    // The console's in-process calls are routed by the URL as written (plugins/inner-calls.ts).
    rewriteUrl: innerUrl,
    frameworkErrors: (err, req, reply) => late.renderError?.(err, req, reply),
    clientErrorHandler: answerClientError,
  }) as unknown as FastifyInstance;

  // JSON is the API's language; routes that take raw bytes or forms add their own parser.
  app.removeContentTypeParser('text/plain');
  installValidation(app);
  late.renderError = installErrors(app);
  installObservability(app, new Registry());
  installAuth(app, {
    db: deps.ctx.db,
    clock: deps.ctx.clock,
    authenticator: deps.authenticator,
    operatorToken: deps.operatorToken,
  });
  // After the auth rows: writes of an organization whose credit is at zero answer 402.
  installCreditBlock(app, { db: deps.ctx.db });

  // Before swagger: the error answers and 204s are in the route schemas swagger reads.
  installOpenApiAnswers(app);
  await app.register(swagger, {
    openapi: {
      info: { title: 'pier control API', version: '1' },
      servers: [{ url: deps.config.publicUrl }],
      components: {
        securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } },
      },
      security: [{ bearer: [] }],
    },
    transform: documentTransform,
  });

  // Shell sessions (machines' exec) upgrade to WebSockets after the usual hooks have run.
  await app.register(websocket, { options: { maxPayload: 1024 * 1024 } });
  await registerRoutes(app, deps);
  // The web console: pages that call the routes above with the person's console key.
  await consolePlugin(app, { config: deps.config });
  // `Host: <app>.<public host>` goes to the app's machines, before any API routing.
  const proxy = new AppProxy({
    publicHost: deps.config.publicUrl,
    ...(deps.config.appsDomain ? { appsDomain: deps.config.appsDomain } : {}),
    targets: new MachineTargets(deps.ctx),
    log: app.log.child({ component: 'proxy' }),
    // Custom domains and zone names, and HTTP→HTTPS where the TLS edge has a certificate.
    resolveHost: edgeResolver(deps.ctx, () => deps.config.tlsPublicPort),
    // Protected apps (password, signed links): judged before anything is forwarded, on the
    // plain listener and the TLS edge alike.
    gate: new ProtectionGate(deps.ctx),
  });
  app.decorate('appProxy', proxy);
  proxyPlugin(app, proxy);
  await s3Gateway(app, deps.ctx);
  for (const family of deps.extraRoutes ?? []) family(app, deps);
  app.get('/v1/openapi.json', { config: { auth: 'public' }, schema: { hide: true } }, async () =>
    app.swagger(),
  );
  return app;
}
