/**
 * Plugging the proxy into the API's Fastify app. App hosts are taken over in the first
 * global `onRequest` hook, before any route's own hooks (auth runs per route), body
 * parsing or the not-found handler: app traffic is not API traffic. Upgrades of app
 * hosts are taken from `app.server`; other upgrades go where they went before.
 */
import http from 'node:http';
import type { Duplex } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import type { AppProxy } from './app-proxy.js';

type UpgradeListener = (req: http.IncomingMessage, socket: Duplex, head: Buffer) => void;

/**
 * Registers the proxy on `app` (the root instance, not inside `register`, so the hook
 * sees every request). Call it before `listen`. Closing the app ends WebSocket tunnels
 * at once and lets proxied HTTP requests in flight finish.
 */
export function proxyPlugin(app: FastifyInstance, proxy: AppProxy): void {
  app.addHook('onRequest', (req, reply, done) => {
    if (proxy.addressFromHost(req.headers.host, req.raw) === undefined) {
      done();
      return;
    }
    // Fastify stops its chain at a hijacked reply: no routing, auth, parsing or logging
    // of an answer; the raw request and response are the proxy's from here.
    reply.hijack();
    void proxy.handle(req.raw, reply.raw);
    done();
  });

  // Listeners are gathered at ready, after every plugin (a WebSocket plugin, say) had
  // its chance to add its own, and replaced by one that sends app hosts to the proxy.
  app.addHook('onReady', (done) => {
    const server = app.server;
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
