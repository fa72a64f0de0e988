/**
 * The child process of `load-mixed`: a cycle of mixed requests per connection (reads,
 * writes, a proxied app, a bucket) against one pier, at a fixed rate per connection, and
 * one JSON report on stdout: totals, status codes, latency percentiles over all requests
 * and per kind, and the CPU this process used. Options arrive as a JSON argument
 * (MixedOptions).
 *
 * The writes are a key made and revoked (`POST /v1/tokens`, then `DELETE /v1/tokens/:id`
 * with the id the create answered) and an object put: each connection deletes only what it
 * made, so a 404 is a failure, not a race between connections. (Secrets would serialize
 * every connection on the one app's row lock: a test of that lock, not of the load.)
 *
 * Pacing (`pacing`):
 * - `even` (the default): connection i sends its k-th request at start + (i/connections +
 *   k) / rate seconds, so the load is spread over each second, as independent clients
 *   spread theirs. One request at a time per keep-alive connection; when an answer comes
 *   late, the next request goes at once, and its latency counts from when it was due, so
 *   that a slow server is not hidden by the client waiting for it (coordinated omission).
 * - `burst`: what autocannon's `connectionRate` does (it was the load generator of this
 *   benchmark until 2026-11-28): every connection sends its `rate` requests back to back at
 *   the start of each second, all connections at the same moment, then waits for the next
 *   second. The load is then a closed loop of all connections until the second's requests
 *   are answered, and the p99 is the time to drain that queue. Kept for comparison.
 */
import net from 'node:net';
import { createHistogram, performance, type RecordableHistogram } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';

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
  /** Requests per second of each connection. */
  rate: number;
  durationS: number;
  /** How each connection's requests are spread over a second (see the file's comment). */
  pacing?: 'even' | 'burst';
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
  /** CPU this process (the load generator) used during the run, in ms. */
  cpuMs: number;
}

/** An answer that takes longer than this is a timeout (a failure). */
const TIMEOUT_MS = 10_000;

interface Step {
  kind: string;
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  path: (n: number, context: Context) => string;
  headers?: Record<string, string>;
  body?: (n: number) => string;
  onResponse?: (status: number, body: string, context: Context) => void;
}

type Context = Record<string, unknown>;

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

/**
 * One keep-alive HTTP/1.1 connection that sends a request and reads its answer, with no
 * more work than that: the load generator shares the two cores with the server it
 * measures, and node:http's client costs several times what this does per request.
 * Answers are read by Content-Length or chunked encoding (all pier sends).
 */
class Connection {
  private socket: net.Socket | undefined;
  private buffered: Buffer = Buffer.alloc(0);
  private waiting:
    | { resolve: (r: { status: number; body: string }) => void; reject: (e: Error) => void }
    | undefined;

  constructor(private readonly url: URL) {}

  private open(): net.Socket {
    const socket = net.connect(Number(this.url.port), this.url.hostname);
    socket.setNoDelay(true);
    socket.on('data', (chunk: Buffer) => {
      this.buffered = this.buffered.length ? Buffer.concat([this.buffered, chunk]) : chunk;
      this.parse();
    });
    const lost = (err?: Error) => {
      if (this.socket === socket) this.socket = undefined;
      const w = this.waiting;
      this.waiting = undefined;
      this.buffered = Buffer.alloc(0);
      w?.reject(err ?? new Error('connection closed'));
    };
    socket.on('error', lost);
    socket.on('close', () => lost());
    return socket;
  }

  /** An answer complete in the buffer, if there is one. */
  private parse(): void {
    const b = this.buffered;
    const headEnd = b.indexOf('\r\n\r\n');
    if (headEnd < 0 || !this.waiting) return;
    const head = b.toString('latin1', 0, headEnd);
    const status = Number(head.slice(9, 12));
    const length = /\r\ncontent-length: *(\d+)/i.exec(head);
    let body: string;
    let used: number;
    if (length) {
      used = headEnd + 4 + Number(length[1]);
      if (b.length < used) return;
      body = b.toString('utf8', headEnd + 4, used);
    } else if (/\r\ntransfer-encoding: *chunked/i.test(head)) {
      const parts: Buffer[] = [];
      let at = headEnd + 4;
      for (;;) {
        const eol = b.indexOf('\r\n', at);
        if (eol < 0) return;
        const size = parseInt(b.toString('latin1', at, eol), 16);
        if (b.length < eol + 2 + size + 2) return;
        if (size === 0) {
          used = eol + 4;
          break;
        }
        parts.push(b.subarray(eol + 2, eol + 2 + size));
        at = eol + 2 + size + 2;
      }
      body = Buffer.concat(parts).toString('utf8');
    } else {
      used = headEnd + 4; // 204, 304: no body
      body = '';
    }
    this.buffered = b.subarray(used);
    const w = this.waiting;
    this.waiting = undefined;
    w.resolve({ status, body });
  }

  send(
    method: string,
    path: string,
    headers: Record<string, string>,
    body?: string,
  ): Promise<{ status: number; body: string }> {
    this.socket ??= this.open();
    let text = `${method} ${path} HTTP/1.1\r\n`;
    if (!('host' in headers)) text += `host: ${this.url.host}\r\n`;
    for (const [k, v] of Object.entries(headers)) text += `${k}: ${v}\r\n`;
    if (body !== undefined) text += `content-length: ${Buffer.byteLength(body)}\r\n`;
    text += `\r\n${body ?? ''}`;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.socket?.destroy(new Error('timeout'));
      }, TIMEOUT_MS);
      this.waiting = {
        resolve: (r) => {
          clearTimeout(timer);
          resolve(r);
        },
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        },
      };
      this.socket!.write(text);
    });
  }

  close(): void {
    this.socket?.destroy();
  }
}

async function run(o: MixedOptions): Promise<MixedReport> {
  const all = createHistogram();
  const byKind = new Map<string, RecordableHistogram>();
  const failures: Record<string, number> = {};
  const failureBodies: string[] = [];
  const statusCodes: Record<string, number> = {};
  const plan = steps(o);
  const pacing = o.pacing ?? 'even';
  const intervalMs = 1000 / o.rate;
  let rounds = 0;
  let requests = 0;
  let non2xx = 0;
  let errors = 0;
  let timeouts = 0;

  const record = (kind: string, ms: number) => {
    const us = Math.max(1, Math.round(ms * 1000));
    all.record(us);
    let h = byKind.get(kind);
    if (!h) byKind.set(kind, (h = createHistogram()));
    h.record(us);
  };

  const cpu0 = process.cpuUsage();
  const start = performance.now() + 50;
  const end = start + o.durationS * 1000;

  const connection = async (i: number) => {
    const conn = new Connection(new URL(o.url));
    const phase = pacing === 'even' ? (i / o.connections) * intervalMs : 0;
    let context: Context = {};
    let n = 0;
    for (let k = 0; ; k++) {
      // When the k-th request is due: spread evenly, or the second's burst.
      const due =
        pacing === 'even' ? start + phase + k * intervalMs : start + Math.floor(k / o.rate) * 1000;
      // Past the end, requests still due are not sent (and the run says it fell behind).
      if (due >= end || performance.now() >= end) break;
      const wait = due - performance.now();
      if (wait > 0) await sleep(wait);
      const index = k % plan.length;
      if (index === 0) {
        context = {};
        n = rounds++;
      }
      const step = plan[index]!;
      // A burst sends back to back: latency from the send. Evenly: from when it was due.
      const from = pacing === 'even' ? due : performance.now();
      try {
        const r = await conn.send(
          step.method,
          step.path(n, context),
          step.headers ?? {},
          step.body?.(n),
        );
        requests++;
        record(step.kind, performance.now() - from);
        statusCodes[r.status] = (statusCodes[r.status] ?? 0) + 1;
        if (r.status < 200 || r.status > 299) {
          non2xx++;
          const key = `${step.kind} ${r.status}`;
          failures[key] = (failures[key] ?? 0) + 1;
          if (failureBodies.length < 10)
            failureBodies.push(`${step.kind} ${r.status}: ${r.body.slice(0, 300)}`);
        }
        step.onResponse?.(r.status, r.body, context);
      } catch (err) {
        if ((err as Error).message === 'timeout') timeouts++;
        else errors++;
        if (failureBodies.length < 10)
          failureBodies.push(`${step.kind}: ${(err as Error).message}`);
      }
    }
    conn.close();
  };
  await Promise.all(Array.from({ length: o.connections }, (_, i) => connection(i)));
  const elapsedS = (performance.now() - start) / 1000;
  const used = process.cpuUsage(cpu0);

  const ms = (h: RecordableHistogram, p: number) => (h.count > 0 ? h.percentile(p) / 1000 : 0);
  return {
    requests,
    requestsPerSec: requests / elapsedS,
    non2xx,
    errors,
    timeouts,
    statusCodes,
    p50Ms: ms(all, 50),
    p99Ms: ms(all, 99),
    maxMs: all.count > 0 ? all.max / 1000 : 0,
    p99MsByKind: Object.fromEntries([...byKind].map(([k, h]) => [k, ms(h, 99)])),
    failures,
    failureBodies,
    cpuMs: (used.user + used.system) / 1000,
  };
}

const arg = process.argv[2];
if (!arg) throw new Error('usage: mixed-worker.ts <MixedOptions as JSON>');
process.stdout.write(`${JSON.stringify(await run(JSON.parse(arg) as MixedOptions))}\n`);
