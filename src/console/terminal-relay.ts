/**
 * The browser terminal's WebSocket. A browser cannot put an Authorization header on a
 * WebSocket, so this console route takes the session cookie instead, checks `Origin`
 * strictly (a page of another site must not open a shell with the person's cookie:
 * cross-site WebSocket hijacking), and relays every frame, unchanged, to the shell-session
 * route `GET /v1/machines/:id/exec` opened with the console key over a loopback
 * connection. So the same admission, audit, session limits and revocation close apply as
 * for the CLI; the frame format is that route's (docs/api.md): binary `[channel, ...bytes]`,
 * text JSON `resize` / `eof` from the browser, `exit` / `error` from the server.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { WebSocket, type RawData } from 'ws';
import { ApiError } from '../errors/api-error.js';
import type { ConsoleRouter, Session } from './router.js';
import { checkSameOrigin } from './session.js';

declare module 'fastify' {
  interface FastifyRequest {
    consoleSession?: Session;
  }
}

/** Where this process's own API listens, for the loopback leg of the relay. */
function ownApiBase(app: FastifyInstance): string | undefined {
  const a = app.server.address();
  if (!a || typeof a !== 'object') return undefined;
  let host = a.address;
  if (host === '0.0.0.0') host = '127.0.0.1';
  else if (host === '::') host = '::1';
  return `ws://${a.family === 'IPv6' || host.includes(':') ? `[${host}]` : host}:${a.port}`;
}

/** Close codes a peer may send (1004–1006 are reserved; ws refuses them). */
function sendableCode(code: number): number {
  const standard = code >= 1000 && code <= 1014 && (code < 1004 || code > 1006);
  return standard || (code >= 3000 && code <= 4999) ? code : 1000;
}

export function terminalRelay(scope: FastifyInstance, router: ConsoleRouter): void {
  scope.route<{ Params: { id: string }; Querystring: Record<string, string> }>({
    method: 'GET',
    url: '/console/ws/machines/:id/exec',
    config: { auth: 'public' },
    preHandler: async (req) => {
      checkSameOrigin(req, router.env.publicUrl, true);
      const session = await router.sessionOf(req);
      if (!session) throw new ApiError('unauthenticated', 'Sign in to the console first.');
      req.consoleSession = session;
    },
    handler: async () => {
      throw new ApiError('upgrade-required', 'The console terminal speaks WebSocket only.');
    },
    wsHandler: (browser, req) => relay(router.env.app, browser, req),
  });
}

function relay(app: FastifyInstance, browser: WebSocket, req: FastifyRequest): void {
  const session = req.consoleSession!;
  const { id } = req.params as { id: string };
  const q = req.query as Record<string, string | undefined>;
  const size = new URLSearchParams();
  for (const k of ['cols', 'rows'] as const) if (q[k] && /^\d{1,4}$/.test(q[k])) size.set(k, q[k]);
  const base = ownApiBase(app);
  if (!base) {
    browser.send(JSON.stringify({ type: 'error', code: 'unavailable', error: 'No API listener.' }));
    browser.close(1011, 'unavailable');
    return;
  }
  const url = `${base}/v1/machines/${encodeURIComponent(id)}/exec?${size}`;
  const upstream = new WebSocket(url, {
    headers: { authorization: `Bearer ${session.token}` },
    maxPayload: 1024 * 1024,
  });
  // What the browser sends before the shell is open is kept, in order.
  const early: [RawData, boolean][] = [];
  browser.on('message', (data, binary) => {
    if (upstream.readyState === WebSocket.OPEN) upstream.send(data, { binary });
    else early.push([data, binary]);
  });
  upstream.on('open', () => {
    for (const [data, binary] of early.splice(0)) upstream.send(data, { binary });
  });
  upstream.on('message', (data, binary) => {
    if (browser.readyState === WebSocket.OPEN) browser.send(data, { binary });
  });
  // The route refused before the upgrade: pass its `{error, code}` on as the route
  // itself would after one.
  upstream.on('unexpected-response', (_r, res) => {
    let text = '';
    res.setEncoding('utf8');
    res.on('data', (chunk: string) => (text += chunk.slice(0, 4096)));
    res.on('end', () => {
      let body: { error?: string; code?: string } = {};
      try {
        body = JSON.parse(text) as typeof body;
      } catch {
        body = { error: `The shell route answered ${res.statusCode}.` };
      }
      if (browser.readyState === WebSocket.OPEN) {
        browser.send(JSON.stringify({ type: 'error', code: body.code, error: body.error }));
        browser.close(1011, String(body.code ?? 'refused').slice(0, 100));
      }
      upstream.terminate();
    });
  });
  upstream.on('error', () => {
    if (browser.readyState === WebSocket.OPEN) browser.close(1011, 'shell unavailable');
  });
  upstream.on('close', (code, reason) => {
    if (browser.readyState === WebSocket.OPEN) browser.close(sendableCode(code), reason);
  });
  browser.on('close', () => {
    if (upstream.readyState === WebSocket.OPEN || upstream.readyState === WebSocket.CONNECTING) {
      upstream.close(1000, 'browser left');
    }
  });
}
