/**
 * What the edge tests share: raw HTTP to the platform's listener with a `Host` of our
 * choosing (fetch may not set Host), a WebSocket handshake, and keys of other kinds.
 */
import http from 'node:http';
import net from 'node:net';
import type { MachineBed } from '../machines/bed.js';

export interface RawAnswer {
  status: number;
  headers: http.IncomingHttpHeaders;
  text: string;
}

/** One request to `bed`'s listener as `host`. */
export function viaProxy(
  bed: MachineBed,
  host: string,
  path: string,
  opts: {
    method?: string;
    headers?: Record<string, string>;
    body?: string;
    /** The client's address (any of 127/8 reaches the listener): limits count per address. */
    from?: string;
  } = {},
): Promise<RawAnswer> {
  const url = new URL(bed.tp.url);
  return new Promise((resolve, reject) => {
    const r = http.request(
      {
        host: url.hostname,
        port: url.port,
        // As given, even `//x` or an absolute URL (absolute-form).
        path,
        method: opts.method ?? 'GET',
        headers: { host, ...opts.headers },
        agent: false,
        ...(opts.from ? { localAddress: opts.from } : {}),
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text }));
      },
    );
    r.on('error', reject);
    r.end(opts.body);
  });
}

/** The status line of a WebSocket handshake sent as `host` (the socket is closed after). */
export function upgradeStatus(
  bed: MachineBed,
  host: string,
  headers: Record<string, string> = {},
): Promise<number> {
  const url = new URL(bed.tp.url);
  return new Promise((resolve, reject) => {
    const s = net.connect(Number(url.port), url.hostname);
    let head = '';
    s.setEncoding('latin1');
    s.on('connect', () => {
      const extra = Object.entries(headers)
        .map(([k, v]) => `${k}: ${v}\r\n`)
        .join('');
      s.write(
        `GET /socket HTTP/1.1\r\nHost: ${host}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n` +
          'Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n' +
          `${extra}\r\n`,
      );
    });
    s.on('data', (c: string) => {
      head += c;
      const m = /^HTTP\/1\.1 (\d{3})/.exec(head);
      if (m) {
        s.destroy();
        resolve(Number(m[1]));
      }
    });
    s.on('error', reject);
    s.on('close', () => resolve(0));
  });
}

/** A key of the bed's org with `body` (scopes, agent block). */
export async function keyOf(bed: MachineBed, body: Record<string, unknown>): Promise<string> {
  const res = await bed.req('POST', '/v1/tokens', { name: 'edge-test', ...body });
  if (res.status !== 201) throw new Error(`token: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.token as string;
}
