/** The proxy inside a Fastify app shaped like pier's: app hosts proxied, the API intact. */
import { once } from 'node:events';
import http from 'node:http';
import net from 'node:net';
import Fastify, { type FastifyInstance } from 'fastify';
import { Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import { installErrors } from '../http/plugins/errors.js';
import { installObservability } from '../http/plugins/observability.js';
import { AppProxy } from './app-proxy.js';
import { proxyPlugin } from './fastify.js';
import {
  ScriptedTargets,
  closeAll,
  listen,
  machine,
  memoryLog,
  send,
  target,
} from './proxy.test-helper.js';

let app: FastifyInstance | undefined;
afterEach(async () => {
  await app?.close();
  app = undefined;
  await closeAll();
});

/**
 * pier's error renderer and /healthz, a route guarded like the auth plugin guards
 * (a route-level onRequest hook), a tiny body limit, and the proxy.
 */
async function apiWithProxy(targets: ScriptedTargets, pluginFirst: boolean) {
  const proxy = new AppProxy({ publicHost: 'http://127.0.0.1:8080', targets, log: memoryLog() });
  const api = Fastify({
    bodyLimit: 1024,
    forceCloseConnections: 'idle',
  }) as unknown as FastifyInstance;
  if (pluginFirst) proxyPlugin(api, proxy);
  installErrors(api);
  installObservability(api, new Registry());
  api.get(
    '/v1/apps',
    {
      onRequest: async (_req, reply) => {
        await reply
          .code(401)
          .send({ error: 'A valid API key is required.', code: 'unauthenticated' });
      },
    },
    async () => [],
  );
  api.post('/v1/echo', async (req) => req.body);
  if (!pluginFirst) proxyPlugin(api, proxy);
  await api.listen({ port: 0, host: '127.0.0.1' });
  app = api;
  return (api.server.address() as net.AddressInfo).port;
}

/** A machine that answers what it was asked, with the body it got. */
async function reporter() {
  return machine((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      res.setHeader('content-type', 'application/json');
      res.end(
        JSON.stringify({ machine: true, method: req.method, url: req.url, length: body.length }),
      );
    });
  });
}

describe.each([true, false])('proxyPlugin (registered first: %s)', (pluginFirst) => {
  it('proxies app hosts, API routes included, past auth and body parsing', async () => {
    const targets = new ScriptedTargets();
    const m = await reporter();
    targets.apps.set('shop', [target('m1', m.port)]);
    const port = await apiWithProxy(targets, pluginFirst);
    const host = 'shop.127.0.0.1:8080';

    for (const path of ['/healthz', '/v1/apps', '/nowhere']) {
      const res = await send(port, host, { path });
      expect(res.status).toBe(200);
      expect(res.json()).toMatchObject({ machine: true, url: path });
    }
    // Not JSON and over the API's body limit: neither matters to an app.
    const big = 'x'.repeat(10_000);
    const posted = await send(port, host, {
      method: 'POST',
      path: '/v1/echo',
      headers: { 'content-type': 'application/json' },
      body: big,
    });
    expect(posted.json()).toMatchObject({ machine: true, length: big.length });
    // The proxy's own errors keep pier's format.
    const ghost = await send(port, 'ghost.127.0.0.1:8080');
    expect(ghost.status).toBe(404);
    expect(ghost.json()).toEqual({ error: 'No app ghost.', code: 'not-found' });
  });

  it('leaves the API host to the API', async () => {
    const port = await apiWithProxy(new ScriptedTargets(), pluginFirst);
    const healthz = await send(port, '127.0.0.1:8080', { path: '/healthz' });
    expect(healthz.status).toBe(200);
    expect(healthz.json()).toEqual({ ok: true });
    const guarded = await send(port, '127.0.0.1:8080', { path: '/v1/apps' });
    expect(guarded.status).toBe(401);
    const missing = await send(port, 'other.example.com', { path: '/nowhere' });
    expect(missing.status).toBe(404);
    expect(missing.json().code).toBe('not-found');
  });

  it('tunnels upgrades of app hosts; API-host upgrades still reach the API', async () => {
    const targets = new ScriptedTargets();
    const server = http.createServer();
    server.on('upgrade', (_req, socket: net.Socket) => {
      socket.write(
        'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n',
      );
      socket.on('data', (d) => socket.write(d));
    });
    targets.apps.set('chat', [target('m1', await listen(server))]);
    const port = await apiWithProxy(targets, pluginFirst);

    const talk = async (host: string, path: string) => {
      const socket = net.connect(port, '127.0.0.1');
      await once(socket, 'connect');
      socket.write(
        `GET ${path} HTTP/1.1\r\nHost: ${host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n`,
      );
      const [data] = (await once(socket, 'data')) as [Buffer];
      return { socket, text: data.toString() };
    };

    const tunnel = await talk('chat.127.0.0.1:8080', '/ws');
    expect(tunnel.text).toMatch(/^HTTP\/1\.1 101 /);
    tunnel.socket.write('ping');
    const [echo] = (await once(tunnel.socket, 'data')) as [Buffer];
    expect(echo.toString()).toBe('ping');

    const api = await talk('127.0.0.1:8080', '/healthz');
    expect(api.text).toMatch(/^HTTP\/1\.1 200 /);
    expect(api.text).toContain('{"ok":true}');
    api.socket.destroy();

    // Closing the app ends open tunnels.
    const closed = once(tunnel.socket, 'close');
    await app!.close();
    app = undefined;
    await closed;
  });

  it('lets a proxied request in flight finish when the app closes', async () => {
    const targets = new ScriptedTargets();
    const slow = await machine((_req, res) => setTimeout(() => res.end('finished'), 300));
    targets.apps.set('shop', [target('m1', slow.port)]);
    const port = await apiWithProxy(targets, pluginFirst);
    const pending = send(port, 'shop.127.0.0.1:8080');
    await new Promise((r) => setTimeout(r, 100));
    const closing = app!.close();
    app = undefined;
    const res = await pending;
    await closing;
    expect(res.status).toBe(200);
    expect(res.text).toBe('finished');
  });
});
