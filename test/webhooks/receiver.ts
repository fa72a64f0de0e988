/**
 * A webhook endpoint on loopback for the tests and the bench: records every request
 * (headers, body, when) and answers by path, so one server plays every kind of endpoint:
 *
 * - `/ok/...`                    200
 * - `/fail/<n>/...`              500 for the first n requests to that path, then 200
 * - `/retry-after/<s>/...`       503 with `Retry-After: <s>` once, then 200
 * - `/gone/...`                  410
 * - `/slow/...`                  never answers (the attempt must time out)
 * - `/huge/...`                  200 and a body that streams without end
 * - `/hold/...`                  holds the request until `release()` (crash tests)
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Received {
  path: string;
  headers: http.IncomingHttpHeaders;
  body: string;
  at: number;
}

export interface Receiver {
  url: string;
  port: number;
  received: Received[];
  /** Requests to paths starting with `prefix`. */
  to(prefix: string): Received[];
  /** Resolves once `n` requests to `prefix` have arrived. */
  waitFor(prefix: string, n?: number, timeoutMs?: number): Promise<Received[]>;
  /** Answers the held requests 200 and stops holding. */
  release(): void;
  close(): Promise<void>;
}

export async function startReceiver(host = '127.0.0.1'): Promise<Receiver> {
  const received: Received[] = [];
  const counts = new Map<string, number>();
  const held: http.ServerResponse[] = [];
  let holding = true;
  const waiters = new Set<() => void>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const path = req.url ?? '/';
      received.push({
        path,
        headers: req.headers,
        body: Buffer.concat(chunks).toString(),
        at: Date.now(),
      });
      for (const w of waiters) w();
      const seen = (counts.get(path) ?? 0) + 1;
      counts.set(path, seen);
      const [, kind, arg] = path.split('/');
      if (kind === 'fail' && seen <= Number(arg)) return void res.writeHead(500).end('nope');
      if (kind === 'retry-after' && seen === 1) {
        return void res.writeHead(503, { 'retry-after': String(arg) }).end();
      }
      if (kind === 'gone') return void res.writeHead(410).end();
      if (kind === 'slow') return; // never answered; closed with the server
      if (kind === 'huge') {
        res.writeHead(200);
        const chunk = Buffer.alloc(64 * 1024, 120);
        const pump = () => {
          while (!res.destroyed && res.write(chunk));
          if (!res.destroyed) res.once('drain', pump);
        };
        pump();
        return;
      }
      if (kind === 'hold' && holding) return void held.push(res);
      res.writeHead(200).end('ok');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  const { port } = server.address() as AddressInfo;
  const to = (prefix: string) => received.filter((r) => r.path.startsWith(prefix));
  return {
    url: `http://${host}:${port}`,
    port,
    received,
    to,
    waitFor(prefix, n = 1, timeoutMs = 10_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          if (to(prefix).length < n) return;
          waiters.delete(check);
          clearTimeout(timer);
          resolve(to(prefix));
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`${to(prefix).length} of ${n} requests to ${prefix} arrived`));
        }, timeoutMs);
        waiters.add(check);
        check();
      });
    },
    release() {
      holding = false;
      for (const res of held.splice(0)) res.writeHead(200).end('ok');
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
