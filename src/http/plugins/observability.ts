/**
 * Request ids, request metrics and the `/metrics` and `/healthz` routes. Each request
 * gets an id (a sane incoming `X-Request-Id` is kept), which is on every log line of
 * the request and returned as a header.
 */
import { randomBytes } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { Counter, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

// Ids are a random per-process prefix plus a counter: unique across replicas, and cheaper
// than drawing random bytes for every request.
const processPrefix = randomBytes(5).toString('hex');
let sequence = 0;

export function newRequestId(incoming: string | string[] | undefined): string {
  if (typeof incoming === 'string' && /^[\w.:-]{1,128}$/.test(incoming)) return incoming;
  return `req-${processPrefix}${(++sequence).toString(36)}`;
}

export function installObservability(app: FastifyInstance, registry: Registry): void {
  collectDefaultMetrics({ register: registry, prefix: 'pier_' });
  const requests = new Counter({
    name: 'pier_http_requests_total',
    help: 'HTTP requests answered, by route and status',
    labelNames: ['method', 'route', 'status'],
    registers: [registry],
  });
  const duration = new Histogram({
    name: 'pier_http_request_duration_seconds',
    help: 'Time from request to answer, by route',
    labelNames: ['method', 'route'],
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10],
    registers: [registry],
  });

  app.addHook('onRequest', async (req, reply) => {
    reply.header('x-request-id', req.id);
  });
  app.addHook('onResponse', async (req, reply) => {
    const route = req.routeOptions.url ?? 'unknown';
    requests.inc({ method: req.method, route, status: String(reply.statusCode) });
    duration.observe({ method: req.method, route }, reply.elapsedTime / 1000);
  });

  app.get('/healthz', { config: { auth: 'public' }, logLevel: 'warn' }, async () => ({ ok: true }));
  app.get('/metrics', { config: { auth: 'public' }, logLevel: 'warn' }, async (_req, reply) => {
    reply.type(registry.contentType);
    return registry.metrics();
  });
}
