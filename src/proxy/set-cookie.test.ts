/**
 * Cookie tossing: an app's `Set-Cookie` never reaches beyond the app's own host, neither
 * in ordinary answers nor in the answer to an upgrade, however the `Domain` is spelled.
 */
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { confineHeadCookies, confineSetCookie, headEnd, type CookieScope } from './set-cookie.js';
import { ScriptedTargets, closeAll, front, listen, send, target } from './proxy.test-helper.js';

afterEach(closeAll);

const APP: CookieScope = { host: 'evil.pier.test', guarded: ['pier.test'] };
const CUSTOM: CookieScope = { host: 'www.shop.com', guarded: ['pier.test'] };

describe('confineSetCookie', () => {
  it('keeps host-only cookies and a Domain of the app host itself', () => {
    for (const v of [
      'a=1',
      'a=1; Path=/; HttpOnly',
      'a=1; Domain=evil.pier.test; Path=/',
      'a=1; domain=.EVIL.pier.test.',
    ]) {
      expect(confineSetCookie(v, APP)).toBe(v);
    }
  });

  it('drops a Domain that reaches the console or another app, however spelled', () => {
    const hostile = [
      'pier_console=k; Domain=pier.test; Path=/console',
      'pier_console=k; domain=.pier.test; Path=/console',
      'pier_console=k;DOMAIN = PIER.TEST ;Path=/console',
      'pier_console=k; Domain=pier.test.; Path=/console',
      'pier_console=k; Domain=%70ier.test; Path=/console',
      'pier_console=k; Domain=ｐｉｅｒ.test; Path=/console',
      'pier_access=x; Domain=victim.pier.test; Path=/',
      'pier_access=x; Domain=test; Path=/',
      'a=1; Domain=evil.pier.test; Domain=pier.test',
      'a=1; Domain=pier.test; Domain=evil.pier.test',
      'a=1; Domain=\tpier.test',
    ];
    for (const v of hostile) {
      const out = confineSetCookie(v, APP);
      expect(out, v).not.toMatch(/domain/i);
      expect(out.split(';')[0], v).toBe(v.split(';')[0]);
    }
    expect(confineSetCookie('pier_console=k; Domain=pier.test; Path=/console', APP)).toBe(
      'pier_console=k; Path=/console',
    );
  });

  it('lets a custom domain widen to its own parent, never to pier’s names', () => {
    expect(confineSetCookie('a=1; Domain=shop.com', CUSTOM)).toBe('a=1; Domain=shop.com');
    expect(confineSetCookie('a=1; Domain=pier.test', CUSTOM)).toBe('a=1');
    expect(confineSetCookie('a=1; Domain=x.pier.test', CUSTOM)).toBe('a=1');
    const under = { host: 'blog.example.com', guarded: ['pier.example.com'] };
    expect(confineSetCookie('a=1; Domain=example.com', under)).toBe('a=1');
  });

  it('reads the value, not a name that only contains "domain"', () => {
    const v = 'domain=pier.test; Path=/';
    expect(confineSetCookie(v, APP)).toBe(v);
    expect(confineSetCookie('a=1; xdomain=pier.test', APP)).toBe('a=1; xdomain=pier.test');
  });
});

describe('confineHeadCookies', () => {
  it('rewrites the head of an upgrade answer, folded lines and bare LFs included', () => {
    const head =
      'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n' +
      'set-cookie: a=1; Domain=pier.test\r\nSet-Cookie: b=2;\r\n Domain=pier.test\r\n\r\n';
    const out = confineHeadCookies(head, APP);
    expect(out).not.toMatch(/domain/i);
    expect(out).toMatch(/^HTTP\/1\.1 101 Switching Protocols\r\nUpgrade: websocket\r\n/);
    expect(out.endsWith('\r\n\r\n')).toBe(true);
    const lf = confineHeadCookies('HTTP/1.1 101 x\nSet-Cookie: a=1; Domain=pier.test\n\n', APP);
    expect(lf).toBe('HTTP/1.1 101 x\nSet-Cookie: a=1\n\n');
  });

  it('finds the end of a head with CRLF or bare LF', () => {
    expect(headEnd(Buffer.from('HTTP/1.1 101 x\r\nA: b\r\n\r\nrest'))).toBe(24);
    expect(headEnd(Buffer.from('HTTP/1.1 101 x\nA: b\n\nrest'))).toBe(21);
    expect(headEnd(Buffer.from('HTTP/1.1 101 x\r\nA: b\r\n'))).toBe(-1);
  });
});

/** A raw machine answering `answer` to whatever comes (HTTP or an upgrade). */
async function rawMachine(answer: string): Promise<number> {
  return listen(
    net.createServer((socket) => {
      socket.once('data', () => socket.end(answer));
    }),
  );
}

describe('through the proxy', () => {
  it('an answer’s hostile cookies reach the client host-only', async () => {
    const targets = new ScriptedTargets();
    const port = await rawMachine(
      'HTTP/1.1 200 OK\r\n' +
        'Set-Cookie: pier_console=theirs; Domain=pier.test; Path=/console\r\n' +
        'Set-Cookie: pier_access=x; domain=.Victim.pier.test; Path=/index.html\r\n' +
        'Set-Cookie: own=1; Domain=evil.pier.test\r\n' +
        'Set-Cookie: plain=1; Path=/\r\n' +
        'Content-Length: 2\r\n\r\nok',
    );
    targets.apps.set('evil', [target('m1', port)]);
    const { port: frontPort } = await front(targets);
    const res = await send(frontPort, 'Evil.Pier.Test:8080', {});
    expect(res.status).toBe(200);
    expect(res.headers['set-cookie']).toEqual([
      'pier_console=theirs; Path=/console',
      'pier_access=x; Path=/index.html',
      'own=1; Domain=evil.pier.test',
      'plain=1; Path=/',
    ]);
  });

  it('an upgrade answer’s hostile cookies reach the client host-only', async () => {
    const targets = new ScriptedTargets();
    const port = await rawMachine(
      'HTTP/1.1 103 Early Hints\r\nSet-Cookie: early=1; Domain=pier.test\r\n\r\n' +
        'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
        'Set-Cookie: pier_console=theirs; Domain=pier.test; Path=/console\r\n\r\n' +
        'frames, not headers: Set-Cookie: x=1; Domain=pier.test\r\n\r\n',
    );
    targets.apps.set('evil', [target('m1', port)]);
    const { port: frontPort } = await front(targets);
    const socket = net.connect(frontPort, '127.0.0.1');
    socket.write(
      'GET /ws HTTP/1.1\r\nHost: evil.pier.test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
        'Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n',
    );
    let text = '';
    socket.setEncoding('latin1');
    socket.on('data', (c: string) => (text += c));
    await new Promise((r) => socket.on('close', r));
    expect(text).toBe(
      'HTTP/1.1 103 Early Hints\r\nSet-Cookie: early=1\r\n\r\n' +
        'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
        'Set-Cookie: pier_console=theirs; Path=/console\r\n\r\n' +
        // After the head, bytes are the app's and pass untouched.
        'frames, not headers: Set-Cookie: x=1; Domain=pier.test\r\n\r\n',
    );
  });
});

describe('apps on a domain of their own (PIER_APPS_DOMAIN)', () => {
  it('routes <app>.<apps domain>, leaves the public host to the API, guards both', async () => {
    const targets = new ScriptedTargets();
    const port = await rawMachine(
      'HTTP/1.1 200 OK\r\n' +
        'Set-Cookie: a=1; Domain=apps.test\r\nSet-Cookie: b=2; Domain=pier.test\r\n' +
        'Content-Length: 2\r\n\r\nok',
    );
    targets.apps.set('shop', [target('m1', port)]);
    const { port: frontPort, proxy } = await front(targets, { appsDomain: 'apps.test' });
    expect(proxy.appFromHost('shop.apps.test')).toBe('shop');
    expect(proxy.appFromHost('shop.pier.test')).toBeUndefined();
    expect((await send(frontPort, 'shop.pier.test')).text).toBe('api');
    const res = await send(frontPort, 'shop.apps.test');
    expect(res.text).toBe('ok');
    expect(res.headers['set-cookie']).toEqual(['a=1', 'b=2']);
  });
});
