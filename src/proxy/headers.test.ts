/** What the machine sees of the client's headers, and what the client sees back. */
import http from 'node:http';
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { endToEnd } from './headers.js';
import {
  ScriptedTargets,
  closeAll,
  front,
  listen,
  machine,
  send,
  target,
} from './proxy.test-helper.js';

afterEach(closeAll);

/** A machine that answers with the raw headers it received. */
async function mirror() {
  return machine((req, res) => {
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify(req.rawHeaders));
  });
}

function pairs(raw: string[]): [string, string][] {
  const out: [string, string][] = [];
  for (let i = 0; i < raw.length; i += 2) out.push([raw[i]!.toLowerCase(), raw[i + 1]!]);
  return out;
}

describe('endToEnd', () => {
  it('drops hop-by-hop headers and those named in Connection', () => {
    const raw = [
      'Connection',
      'close, X-Secret',
      'X-Secret',
      '1',
      'Keep-Alive',
      'x',
      'TE',
      'trailers',
      'X-Kept',
      '2',
      'X-Kept',
      '3',
    ];
    expect(endToEnd(raw)).toEqual(['X-Kept', '2', 'X-Kept', '3']);
  });
});

describe('request headers', () => {
  it('passes Host, sets X-Forwarded-*, drops hop-by-hop and spoofed forwarding', async () => {
    const targets = new ScriptedTargets();
    const m = await mirror();
    targets.apps.set('shop', [target('m1', m.port)]);
    const { port } = await front(targets);

    const res = await send(port, 'shop.pier.test:8080', {
      headers: {
        connection: 'keep-alive, x-hop',
        'x-hop': 'gone',
        'keep-alive': 'timeout=5',
        te: 'trailers',
        'proxy-authorization': 'Basic xyz',
        'x-forwarded-for': '6.6.6.6',
        'x-forwarded-host': 'evil.example',
        forwarded: 'for=6.6.6.6',
        'x-custom': 'kept',
        cookie: 'a=1',
      },
    });
    const seen = pairs(res.json());
    const get = (name: string) => seen.filter(([k]) => k === name).map(([, v]) => v);
    expect(get('host')).toEqual(['shop.pier.test:8080']);
    expect(get('x-forwarded-for')).toEqual(['127.0.0.1']);
    expect(get('x-forwarded-proto')).toEqual(['http']);
    expect(get('x-forwarded-host')).toEqual(['shop.pier.test:8080']);
    expect(get('x-custom')).toEqual(['kept']);
    expect(get('cookie')).toEqual(['a=1']);
    for (const gone of ['x-hop', 'te', 'proxy-authorization', 'forwarded'])
      expect(get(gone)).toEqual([]);
    // The proxy's own connection to the machine is kept alive by the proxy, not the client.
    expect(get('keep-alive')).toEqual([]);
  });

  it('appends to X-Forwarded-For behind a trusted balancer', async () => {
    const targets = new ScriptedTargets();
    const m = await mirror();
    targets.apps.set('shop', [target('m1', m.port)]);
    const { port } = await front(targets, { trustForwarded: true });
    const res = await send(port, 'shop.pier.test', {
      headers: {
        'x-forwarded-for': '203.0.113.7',
        'x-forwarded-proto': 'https',
        'x-forwarded-host': 'shop.example.com',
      },
    });
    const seen = new Map(pairs(res.json()));
    expect(seen.get('x-forwarded-for')).toBe('203.0.113.7, 127.0.0.1');
    expect(seen.get('x-forwarded-proto')).toBe('https');
    expect(seen.get('x-forwarded-host')).toBe('shop.example.com');
  });

  it('keeps the method, path and query', async () => {
    const targets = new ScriptedTargets();
    const m = await machine((req, res) => res.end(`${req.method} ${req.url}`));
    targets.apps.set('shop', [target('m1', m.port)]);
    const { port } = await front(targets);
    const res = await send(port, 'shop.pier.test', { method: 'DELETE', path: '/a/b?c=1&d=%20' });
    expect(res.text).toBe('DELETE /a/b?c=1&d=%20');
  });
});

describe('response headers', () => {
  it('keeps status, duplicates and cookies; drops hop-by-hop', async () => {
    const targets = new ScriptedTargets();
    // A raw machine, so the answer carries exactly the headers we write.
    const raw = net.createServer((socket) => {
      socket.once('data', () => {
        socket.end(
          'HTTP/1.1 201 Made It\r\n' +
            'Set-Cookie: a=1\r\nSet-Cookie: b=2\r\n' +
            'X-Dup: 1\r\nX-Dup: 2\r\n' +
            'Connection: close, X-Private\r\nX-Private: secret\r\n' +
            'Keep-Alive: timeout=9\r\n' +
            'Content-Length: 2\r\n\r\nok',
        );
      });
    });
    targets.apps.set('shop', [target('m1', await listen(raw))]);
    const { port } = await front(targets);

    const res = await new Promise<http.IncomingMessage & { body: string }>((resolve) => {
      http
        .get(
          { port, host: '127.0.0.1', headers: { host: 'shop.pier.test' }, agent: false },
          (r) => {
            let body = '';
            r.on('data', (c) => (body += c));
            r.on('end', () => resolve(Object.assign(r, { body })));
          },
        )
        .end();
    });
    expect(res.statusCode).toBe(201);
    expect(res.statusMessage).toBe('Made It');
    expect(res.body).toBe('ok');
    expect(res.headers['set-cookie']).toEqual(['a=1', 'b=2']);
    const dups = pairs(res.rawHeaders).filter(([k]) => k === 'x-dup');
    expect(dups.map(([, v]) => v)).toEqual(['1', '2']);
    expect(res.headers['x-private']).toBeUndefined();
    expect(res.headers['keep-alive']).not.toBe('timeout=9');
  });
});
