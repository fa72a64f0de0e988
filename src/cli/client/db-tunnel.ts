/**
 * The local end of a database tunnel (`pier db connect`, `pier db proxy`), the way
 * `fly proxy` works: a listener on 127.0.0.1, and for each connection it accepts one
 * WebSocket to `GET /v1/resources/:name/tunnel` carrying that connection's bytes. A
 * database's front serves only its host and the machines' network, so this is how a
 * laptop reaches it. The bytes are the client's TLS session with the server, untouched.
 */
import type { IncomingMessage } from 'node:http';
import net from 'node:net';
import WebSocket from 'ws';
import { readAnswer } from './exec-client.js';

/** Where and as whom tunnels are opened. */
export interface TunnelTarget {
  apiUrl: string;
  apiKey: string;
  /** The database's name. */
  name: string;
}

/** Bytes waiting in either direction before the other side stops being read. */
const HIGH_WATER = 1 << 20;

/** The upgrade address: ws(s):// form of the API address. */
export function tunnelUrl(target: TunnelTarget): string {
  const url = new URL(`/v1/resources/${encodeURIComponent(target.name)}/tunnel`, target.apiUrl);
  url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
  return url.toString();
}

export interface TunnelListener {
  port: number;
  close(): Promise<void>;
}

/**
 * Listens on 127.0.0.1:`port` (0: a free one) and tunnels each connection. `report` gets
 * one line per refusal or failure (the API's error, or why the tunnel closed), so a
 * client that only says "server closed the connection" is explained.
 */
export async function listenTunnel(
  target: TunnelTarget,
  port: number,
  report: (line: string) => void,
): Promise<TunnelListener> {
  const open = new Set<net.Socket>();
  const tunnels = new Set<WebSocket>();
  const server = net.createServer({ pauseOnConnect: true, noDelay: true }, (local) => {
    open.add(local);
    local.once('close', () => open.delete(local));
    const ws = carry(target, local, report);
    tunnels.add(ws);
    ws.once('close', () => tunnels.delete(ws));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ host: '127.0.0.1', port }, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return {
    port: (server.address() as net.AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of open) s.destroy();
        // Cut at once: a closing handshake the server is slow to answer would keep the
        // CLI alive after its client exited, with nothing left to carry.
        for (const ws of tunnels) ws.terminate();
        server.close(() => resolve());
      }),
  };
}

/** Splices one local connection with its tunnel; each side is read only while the other keeps up. */
function carry(target: TunnelTarget, local: net.Socket, report: (line: string) => void): WebSocket {
  const ws = new WebSocket(tunnelUrl(target), {
    headers: { authorization: `Bearer ${target.apiKey}` },
    perMessageDeflate: false,
  });
  local.on('error', () => {});
  let ended = false; // past this, errors are of our own making (closing the handshake)
  const end = () => {
    ended = true;
    local.destroy();
    if (ws.readyState === WebSocket.OPEN || ws.readyState === WebSocket.CONNECTING) ws.terminate();
  };
  ws.on('error', (err: NodeJS.ErrnoException) => {
    if (ended) return;
    report(`cannot reach ${target.apiUrl}: ${err.code ?? err.message}`);
    end();
  });
  ws.once('unexpected-response', (_req, res: IncomingMessage) => {
    // The client is cut only once the reason is out: it exits as soon as it is, and the
    // reason must come before (and whatever) it says.
    readAnswer(res)
      .then(
        (err) => report(`the tunnel to ${target.name} was refused: ${err.message} (${err.code})`),
        (err: Error) => report(`the tunnel answer broke off: ${err.message}`),
      )
      .finally(end);
  });
  ws.once('open', () => {
    local.on('data', (chunk: Buffer) => {
      ws.send(chunk, { binary: true }, () => {
        if (ws.bufferedAmount < HIGH_WATER && local.isPaused()) local.resume();
      });
      if (ws.bufferedAmount >= HIGH_WATER) local.pause();
    });
    local.resume();
  });
  ws.on('message', (data: WebSocket.RawData, binary: boolean) => {
    if (!binary) {
      // The server explains an end it chose (the key revoked, the database unreachable).
      const text = Buffer.isBuffer(data) ? data.toString('utf8') : '';
      const said = safeJson(text);
      if (said && typeof said.error === 'string') report(`the tunnel closed: ${said.error}`);
      return;
    }
    const bytes = Buffer.isBuffer(data) ? data : Buffer.concat(data as Buffer[]);
    if (!local.write(bytes)) ws.pause();
  });
  local.on('drain', () => ws.resume());
  ws.once('close', () => local.end());
  local.once('close', () => {
    ended = true;
    if (ws.readyState === WebSocket.OPEN) ws.close(1000, 'client-closed');
    else if (ws.readyState === WebSocket.CONNECTING) ws.terminate();
  });
  return ws;
}

function safeJson(text: string): Record<string, unknown> | undefined {
  try {
    const v = JSON.parse(text) as unknown;
    return typeof v === 'object' && v !== null ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}
