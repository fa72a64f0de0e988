/**
 * The child process of `load-mixed`: autocannon against one pier with a cycle of mixed
 * requests per connection (reads, writes, a proxied app, a bucket), at a fixed rate per
 * connection, and one JSON report on stdout: totals, status codes, latency percentiles
 * over all requests and per kind. Options arrive as a JSON argument (MixedOptions).
 *
 * The writes are a key made and revoked (`POST /v1/tokens`, then `DELETE /v1/tokens/:id`
 * with the id the create answered) and an object put: each connection deletes only what it
 * made, so a 404 is a failure, not a race between connections. (Secrets would serialize
 * every connection on the one app's row lock: a test of that lock, not of the load.)
 */
import { createHistogram, type RecordableHistogram } from 'node:perf_hooks';
import autocannon from 'autocannon';

export interface MixedOptions {
  /** pier's listener, `http://127.0.0.1:<port>`. */
  url: string;
  token: string;
  app: string;
  /** The Host header of the app's proxied requests (`<app>.127.0.0.1`). */
  appHost: string;
  /** The path the app's machine serves. */
  appPath: string;
  /** Presigned GET URLs of existing objects (path and query on pier's listener). */
  getPaths: string[];
  /** Presigned PUT URLs, one per connection at least. */
  putPaths: string[];
  putBody: string;
  connections: number;
  /** Requests per second of each connection (autocannon's connectionRate). */
  rate: number;
  durationS: number;
}

export interface MixedReport {
  requests: number;
  requestsPerSec: number;
  non2xx: number;
  errors: number;
  timeouts: number;
  statusCodes: Record<string, number>;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  /** p99 per kind of request. */
  p99MsByKind: Record<string, number>;
  /** Non-2xx answers per kind and status, e.g. `token-create 500`. */
  failures: Record<string, number>;
  /** The first few non-2xx answers: kind, status and the start of the body. */
  failureBodies: string[];
}

type Context = Record<string, unknown>;

interface Step {
  kind: string;
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  path: (n: number, context: Context) => string;
  headers?: Record<string, string>;
  body?: (n: number) => string;
  onResponse?: (status: number, body: string, context: Context) => void;
}

function steps(o: MixedOptions): Step[] {
  const auth = { authorization: `Bearer ${o.token}` };
  const json = { ...auth, 'content-type': 'application/json' };
  return [
    { kind: 'app-get', method: 'GET', path: () => `/v1/apps/${o.app}`, headers: auth },
    { kind: 'proxied-get', method: 'GET', path: () => o.appPath, headers: { host: o.appHost } },
    {
      kind: 'token-create',
      method: 'POST',
      path: () => '/v1/tokens',
      headers: json,
      body: (n) => JSON.stringify({ name: `load-${n}`, ttlSeconds: 3600 }),
      onResponse: (status, body, context) => {
        if (status === 201) context.tokenId = (JSON.parse(body) as { id: string }).id;
      },
    },
    { kind: 'object-get', method: 'GET', path: (n) => o.getPaths[n % o.getPaths.length]! },
    {
      kind: 'machines-list',
      method: 'GET',
      path: () => `/v1/apps/${o.app}/machines`,
      headers: auth,
    },
    {
      kind: 'object-put',
      method: 'PUT',
      path: (n) => o.putPaths[n % o.putPaths.length]!,
      body: () => o.putBody,
    },
    { kind: 'proxied-get', method: 'GET', path: () => o.appPath, headers: { host: o.appHost } },
    {
      kind: 'token-delete',
      method: 'DELETE',
      path: (_n, context) => `/v1/tokens/${String(context.tokenId ?? 'none')}`,
      headers: auth,
    },
  ];
}

async function run(o: MixedOptions): Promise<MixedReport> {
  const all = createHistogram();
  const byKind = new Map<string, RecordableHistogram>();
  const failures: Record<string, number> = {};
  const failureBodies: string[] = [];
  const plan = steps(o);
  // Contexts live for one round of the plan: each round draws a fresh number.
  let rounds = 0;
  const instance = autocannon({
    url: o.url,
    connections: o.connections,
    connectionRate: o.rate,
    duration: o.durationS,
    timeout: 10,
    requests: plan.map((s) => ({
      method: s.method,
      onResponse: (status: number, body: string, context: Context) => {
        if ((status < 200 || status > 299) && failureBodies.length < 10)
          failureBodies.push(`${s.kind} ${status}: ${body.slice(0, 300)}`);
        s.onResponse?.(status, body, context);
      },
      setupRequest: (req: Record<string, unknown>, context: Context) => {
        if (context.n === undefined) context.n = rounds++;
        const n = context.n as number;
        return {
          ...req,
          method: s.method,
          path: s.path(n, context),
          headers: { ...(s.headers ?? {}) },
          ...(s.body ? { body: s.body(n) } : {}),
        };
      },
    })),
  });
  instance.on('response', (client, status, _bytes, ms) => {
    const us = Math.max(1, Math.round(ms * 1000));
    all.record(us);
    // Emitted before the connection moves on: its current request is the one answered.
    const index = (client as { requestIterator?: { currentRequestIndex?: number } }).requestIterator
      ?.currentRequestIndex;
    const kind = plan[index ?? -1]?.kind ?? 'unknown';
    let h = byKind.get(kind);
    if (!h) byKind.set(kind, (h = createHistogram()));
    h.record(us);
    if (status < 200 || status > 299) {
      const k = `${kind} ${status}`;
      failures[k] = (failures[k] ?? 0) + 1;
    }
  });
  const r = await instance;
  const statusCodes: Record<string, number> = {};
  for (const [code, s] of Object.entries(r.statusCodeStats)) statusCodes[code] = Number(s.count);
  const ms = (h: RecordableHistogram, p: number) => (h.count > 0 ? h.percentile(p) / 1000 : 0);
  return {
    requests: r.requests.total,
    requestsPerSec: r.requests.average,
    non2xx: r.non2xx,
    errors: r.errors,
    timeouts: r.timeouts,
    statusCodes,
    p50Ms: ms(all, 50),
    p99Ms: ms(all, 99),
    maxMs: all.count > 0 ? all.max / 1000 : 0,
    p99MsByKind: Object.fromEntries([...byKind].map(([k, h]) => [k, ms(h, 99)])),
    failures,
    failureBodies,
  };
}

const arg = process.argv[2];
if (!arg) throw new Error('usage: mixed-worker.ts <MixedOptions as JSON>');
process.stdout.write(`${JSON.stringify(await run(JSON.parse(arg) as MixedOptions))}\n`);
