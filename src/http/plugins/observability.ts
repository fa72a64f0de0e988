/**
 * Request ids, request metrics and the `/metrics` (operator token) and `/healthz` routes.
 * Each request gets an id (a sane incoming `X-Request-Id` is kept), which is on every log
 * line of the request and returned as a header. What those log lines may hold is decided
 * in `redact.ts`.
 */
import { randomBytes } from 'node:crypto';
import type { FastifyInstance, onResponseHookHandler } from 'fastify';
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

  // Callback-style hooks: they run on every request, and a promise each would show.
  app.addHook('onRequest', (req, reply, done) => {
    reply.header('x-request-id', req.id);
    done();
  });
  // Each route gets its own onResponse hook with its labels fixed at registration: no
  // label hashing and no route lookup per request.
  app.addHook('onRoute', (route) => {
    const url = route.url;
    const byStatus = new Map<string, { count: Counter; time: ReturnType<Histogram['labels']> }>();
    const record: onResponseHookHandler = (req, reply, done) => {
      const key = `${req.method}${reply.statusCode}`;
      let child = byStatus.get(key);
      if (!child) {
        const labels = { method: req.method, route: url };
        child = {
          count: requests.labels({
            ...labels,
            status: String(reply.statusCode),
          }) as unknown as Counter,
          time: duration.labels(labels),
        };
        byStatus.set(key, child);
      }
      child.count.inc();
      child.time.observe(reply.elapsedTime / 1000);
      done();
    };
    const existing = route.onResponse;
    route.onResponse =
      existing === undefined
        ? [record]
        : [record, ...(Array.isArray(existing) ? existing : [existing])];
  });
  // Answers without a route (404, 405) are counted under the route label "unknown".
  app.addHook('onResponse', (req, reply, done) => {
    if (req.is404)
      requests.inc({ method: req.method, route: 'unknown', status: String(reply.statusCode) });
    done();
  });

  // Registered as a plugin, so the routes are added when plugins load: after every
  // onRoute hook of the app (auth's among them) is in place, whatever the install order.
  // Added at once, `/metrics` would miss the operator check that its auth row asks for.
  void app.register(async (scope) => {
    scope.get('/healthz', { config: { auth: 'public' }, logLevel: 'warn' }, async () => ({
      ok: true,
    }));
    // Metrics name routes, apps' traffic and the process's state: the operator's only.
    scope.get(
      '/metrics',
      { config: { auth: 'operator' }, logLevel: 'warn' },
      async (_req, reply) => {
        reply.type(registry.contentType);
        return registry.metrics();
      },
    );
  });
}
