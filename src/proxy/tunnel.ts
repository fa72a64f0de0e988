/**
 * WebSocket (and any other `Upgrade`) traffic: a byte tunnel. The proxy connects to the
 * machine, replays the handshake with rewritten headers and then copies bytes both
 * ways; the machine's `101 Switching Protocols` travels back as ordinary bytes, so the
 * proxy needs no knowledge of WebSocket frames.
 */
import net from 'node:net';
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { ApiError } from '../errors/api-error.js';
import { answerErrorRaw } from './answer.js';
import { upstreamRequestHeaders } from './headers.js';
import { ConnectFailure, asConnectFailure } from './picker.js';
import { headEnd } from './set-cookie.js';
import type { ProxyTarget } from './types.js';

/** Opens a TCP connection to `target`; rejects with ConnectFailure. */
export function connectTo(target: ProxyTarget, timeoutMs: number): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: target.host, port: target.port });
    const timer = setTimeout(() => socket.destroy(new ConnectFailure('timeout')), timeoutMs);
    socket.once('connect', () => {
      clearTimeout(timer);
      socket.removeAllListeners('error');
      resolve(socket);
    });
    socket.once('error', (err) => {
      clearTimeout(timer);
      reject(asConnectFailure(err));
    });
  });
}

/** The handshake as the machine receives it. */
function handshake(req: IncomingMessage, trustForwarded: boolean): string {
  const headers = upstreamRequestHeaders(req, { trustForwarded, upgrade: true });
  let text = `${req.method ?? 'GET'} ${req.url ?? '/'} HTTP/1.1\r\n`;
  // Node's parser has already refused CR and LF in names and values.
  for (let i = 0; i < headers.length; i += 2) text += `${headers[i]}: ${headers[i + 1]}\r\n`;
  return text + '\r\n';
}

/** A machine's answer head longer than this cuts the tunnel (Node's own limit for heads). */
const MAX_HEAD_BYTES = 16 * 1024;

/**
 * Passes the machine's answer heads to `socket` through `rewrite` (informational `1xx`
 * heads, then the `101` or final one), then pipes the rest of `upstream` as it comes.
 */
function relayHeads(upstream: net.Socket, socket: Duplex, rewrite: (head: string) => string) {
  let pending = Buffer.alloc(0);
  const onData = (chunk: Buffer): void => {
    pending = Buffer.concat([pending, chunk]);
    for (;;) {
      const end = headEnd(pending);
      if (end < 0) {
        if (pending.length > MAX_HEAD_BYTES) {
          upstream.destroy();
          socket.destroy();
        }
        return;
      }
      const head = pending.subarray(0, end).toString('latin1');
      socket.write(Buffer.from(rewrite(head), 'latin1'));
      pending = pending.subarray(end);
      const status = Number(/^HTTP\/\d(?:\.\d)? (\d{3})/.exec(head)?.[1] ?? 0);
      if (status < 100 || status >= 200 || status === 101) break;
    }
    upstream.off('data', onData);
    if (pending.length) socket.write(pending);
    upstream.pipe(socket, { end: false });
  };
  upstream.on('data', onData);
}

/** What a tunnel needs from the proxy. */
export interface TunnelContext {
  responseTimeoutMs: number;
  trustForwarded: boolean;
  /** The machine's answer head as the client may see it (its cookies confined). */
  rewriteHead(head: string): string;
  /** Traffic went through (called at most about once a second per tunnel). */
  onTraffic(): void;
}

/**
 * Joins the client's `socket` to the connected `upstream`. Answers 504 when the machine
 * sends nothing within the response timeout and 502 when it closes without a byte;
 * once the machine has answered, either side closing closes both.
 */
export function splice(
  req: IncomingMessage,
  socket: Duplex,
  head: Buffer,
  upstream: net.Socket,
  ctx: TunnelContext,
): void {
  let lastTouch = Date.now();
  const traffic = (): void => {
    const now = Date.now();
    if (now - lastTouch < 1000) return;
    lastTouch = now;
    ctx.onTraffic();
  };
  let answered = false;
  let failed = false;
  // Until the machine answers, its failures become error answers; after, they cut.
  const fail = (err: ApiError): void => {
    if (failed || answered) return;
    failed = true;
    clearTimeout(timer);
    socket.unpipe(upstream);
    upstream.unpipe(socket);
    upstream.destroy();
    answerErrorRaw(socket, err);
  };
  const timer = setTimeout(
    () => fail(new ApiError('upstream-timeout', "The app's machine did not answer in time.")),
    ctx.responseTimeoutMs,
  );

  const noAnswer = (): void =>
    fail(
      new ApiError('upstream-failed', "The app's machine closed the connection without an answer."),
    );

  upstream.setNoDelay(true);
  upstream.write(handshake(req, ctx.trustForwarded));
  if (head.length > 0) upstream.write(head);
  upstream.once('data', () => {
    answered = true;
    clearTimeout(timer);
  });
  upstream.on('data', traffic);
  socket.on('data', traffic);
  // The machine's orderly close (FIN) is passed on by hand: before any answer it
  // becomes a 502 instead. Its answer heads are read and rewritten before the bytes
  // after them flow untouched.
  relayHeads(upstream, socket, ctx.rewriteHead);
  socket.pipe(upstream);
  upstream.on('end', () => {
    if (answered) socket.end();
    else noAnswer();
  });

  upstream.on('error', () => {
    if (answered) socket.destroy();
    else noAnswer();
  });
  upstream.on('close', () => {
    if (!answered) noAnswer();
  });
  socket.on('error', () => upstream.destroy());
  socket.on('close', () => {
    clearTimeout(timer);
    upstream.destroy();
  });
}
