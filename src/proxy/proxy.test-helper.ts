/**
 * Test fixtures of the proxy: real upstream HTTP servers on 127.0.0.1 playing machines,
 * a scripted `ProxyTargets` over them, a front server running an AppProxy, and a small
 * client. Everything started is closed by `closeAll` (call it in afterEach).
 */
import { once } from 'node:events';
import http from 'node:http';
import net from 'node:net';
import { AppProxy } from './app-proxy.js';
import type { AppProxyOptions, ProxyLog, ProxyTarget, ProxyTargets } from './types.js';

const cleanups: (() => Promise<unknown> | void)[] = [];

/** Closes everything the fixtures started, last first. */
export async function closeAll(): Promise<void> {
  for (const fn of cleanups.splice(0).reverse()) await fn();
}

/** A log that keeps lines for assertions instead of printing them. */
export function memoryLog(): ProxyLog & { lines: { level: string; msg?: string }[] } {
  const lines: { level: string; msg?: string }[] = [];
  return {
    lines,
    warn: (_o, msg) => lines.push({ level: 'warn', msg }),
    error: (_o, msg) => lines.push({ level: 'error', msg }),
    debug: (_o, msg) => lines.push({ level: 'debug', msg }),
  };
}

/** Listens on 127.0.0.1 at a free port and registers the server for closing. */
export async function listen(server: http.Server | net.Server): Promise<number> {
  const sockets = new Set<net.Socket>();
  server.on('connection', (s: net.Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  cleanups.push(async () => {
    for (const s of sockets) s.destroy();
    if (server.listening) await new Promise((r) => server.close(r));
  });
  return (server.address() as net.AddressInfo).port;
}

/** An upstream "machine": an HTTP server running `handler`. */
export async function machine(
  handler: http.RequestListener,
): Promise<{ server: http.Server; port: number }> {
  const server = http.createServer(handler);
  return { server, port: await listen(server) };
}

/** A port on which nothing listens (bound, then released). */
export async function deadPort(): Promise<number> {
  const server = net.createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as net.AddressInfo).port;
  await new Promise((r) => server.close(r));
  return port;
}

/**
 * The proxy's seam as the test scripts it (apps are a map the test edits; wake and touch
 * are recorded) in front of real upstream servers. The machines behind the real seam are
 * tested end to end in test/machines/api.test.ts.
 */
export class ScriptedTargets implements ProxyTargets {
  readonly apps = new Map<string, ProxyTarget[]>();
  /** Exposed ports: `app:port` → machines. */
  readonly exposed = new Map<string, ProxyTarget[]>();
  readonly woken: string[] = [];
  readonly touched: string[] = [];
  resolveCalls = 0;
  /** What wake does; by default the machine becomes running at once. */
  wakeImpl: (t: ProxyTarget) => Promise<void> = async (t) => {
    t.state = 'running';
  };

  async resolve(app: string, port?: number): Promise<ProxyTarget[] | undefined> {
    this.resolveCalls++;
    return port === undefined ? this.apps.get(app) : this.exposed.get(`${app}:${port}`);
  }

  async wake(machineId: string): Promise<void> {
    this.woken.push(machineId);
    const target = [...this.apps.values(), ...this.exposed.values()]
      .flat()
      .find((t) => t.machineId === machineId);
    if (!target) throw new Error(`no machine ${machineId}`);
    await this.wakeImpl(target);
  }

  touch(machineId: string): void {
    this.touched.push(machineId);
  }

  /** Set to act as targets that keep lists (MachineTargets); unset, the picker never asks. */
  forget?: (app: string) => void;
}

/** A target on 127.0.0.1. */
export function target(
  machineId: string,
  port: number,
  state: ProxyTarget['state'] = 'running',
): ProxyTarget {
  return { machineId, host: '127.0.0.1', port, state };
}

/**
 * A front server as the platform would run it without Fastify: app hosts go to the
 * proxy, anything else answers `api` (standing in for the API).
 */
export async function front(
  targets: ProxyTargets,
  options: Partial<AppProxyOptions> = {},
): Promise<{ port: number; proxy: AppProxy; log: ReturnType<typeof memoryLog> }> {
  const log = memoryLog();
  const proxy = new AppProxy({ publicHost: 'pier.test', targets, log, ...options });
  const server = http.createServer((req, res) => {
    if (proxy.appFromHost(req.headers.host) !== undefined) void proxy.handle(req, res);
    else res.end('api');
  });
  server.on('upgrade', (req, socket, head) => void proxy.upgrade(req, socket, head));
  const port = await listen(server);
  cleanups.push(() => proxy.close());
  return { port, proxy, log };
}

export interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  text: string;
  json(): any; // eslint-disable-line @typescript-eslint/no-explicit-any
}

/** One request with its own connection; resolves with the whole answer. */
export function send(
  port: number,
  host: string,
  opts: { path?: string; method?: string; headers?: http.OutgoingHttpHeaders; body?: string } = {},
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        path: opts.path ?? '/',
        method: opts.method ?? 'GET',
        headers: { host, ...opts.headers },
        agent: false,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString();
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            text,
            json: () => JSON.parse(text),
          });
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(opts.body);
  });
}
