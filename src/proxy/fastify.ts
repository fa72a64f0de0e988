/**
 * Plugging the proxy into the API's Fastify app. App hosts are taken from the server's
 * `request` event before Fastify's handler sees them: app traffic is not API traffic, and
 * Fastify's work per request (request id, child logger, the "incoming request" and
 * "request completed" log lines, routing, hooks, metrics) was a large part of the
 * proxy's cost. Upgrades of app hosts are taken from `app.server` likewise; other requests
 * and upgrades go where they went before.
 */
import http from 'node:http';
import type { Duplex } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import type { AppProxy } from './app-proxy.js';

type UpgradeListener = (req: http.IncomingMessage, socket: Duplex, head: Buffer) => void;

type RequestListener = (req: http.IncomingMessage, res: http.ServerResponse) => void;

/**
 * Registers the proxy on `app`'s server. Call it before `listen`. Closing the app ends
 * WebSocket tunnels at once and lets proxied HTTP requests in flight finish. Requests
 * injected with `app.inject()` never reach the proxy (they have no server).
 */
export function proxyPlugin(app: FastifyInstance, proxy: AppProxy): void {
  const server = app.server;
  // Once the app closes, every request goes to Fastify, which answers 503 and closes the
  // connection, as for the API.
  let closing = false;
  const api = server.listeners('request') as RequestListener[];
  server.removeAllListeners('request');
  server.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
    const address = closing ? undefined : proxy.addressFromHost(req.headers.host, req);
    if (address) {
      void proxy.handle(req, res, address);
      return;
    }
    for (const listener of api) listener.call(server, req, res);
  });

  // Listeners are gathered at ready, after every plugin (a WebSocket plugin, say) had
  // its chance to add its own, and replaced by one that sends app hosts to the proxy.
  app.addHook('onReady', (done) => {
    const others = server.listeners('upgrade') as UpgradeListener[];
    server.removeAllListeners('upgrade');
    server.on('upgrade', (req: http.IncomingMessage, socket: Duplex, head: Buffer) => {
      if (proxy.addressFromHost(req.headers.host, req) !== undefined) {
        void proxy.upgrade(req, socket, head);
      } else if (others.length > 0) {
        for (const listener of others) listener.call(server, req, socket, head);
      } else {
        asPlainRequest(server, req, socket, head);
      }
    });
    done();
  });

  // Tunnels go before the server closes (it would wait for them forever); the
  // machines' kept-alive connections after, once requests in flight have finished.
  app.addHook('preClose', (done) => {
    closing = true;
    proxy.closeTunnels();
    done();
  });
  app.addHook('onClose', (_instance, done) => {
    proxy.close();
    done();
  });
}

/**
 * Without any `upgrade` listener Node hands an upgrade request to the `request` event
 * like any other, and the API answers it (say, 426 or 404). Our listener took that path
 * away, so an API-host upgrade is given back to the request handler on a response
 * bound to the socket, which closes after the answer.
 */
function asPlainRequest(
  server: http.Server,
  req: http.IncomingMessage,
  socket: Duplex,
  head: Buffer,
): void {
  socket.on('error', () => socket.destroy());
  if (head.length > 0) socket.unshift(head);
  const res = new http.ServerResponse(req);
  res.shouldKeepAlive = false;
  res.assignSocket(socket as import('node:net').Socket);
  res.on('finish', () => {
    res.detachSocket(socket as import('node:net').Socket);
    socket.end();
  });
  server.emit('request', req, res);
}
