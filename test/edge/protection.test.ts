/**
 * App protection through the real proxy to a real machine (spec 4.6, 5.10): password
 * mode by HTTP Basic and by the form and its cookie, signed links and access tokens,
 * expiry, revocation and rotation, WebSocket upgrades refused without credentials; and
 * the routes' bad input, other organizations, read-only keys and agent tokens.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { busyboxLayer } from '../../src/runtime/images/build.test-helper.js';
import { canRunMachines, startMachineBed, type MachineBed } from '../machines/bed.js';
import { PASSWORD_GUESSES } from '../../src/proxy/protection.js';
import { keyOf, upgradeStatus, viaProxy } from './edge.test-helper.js';

let bed: MachineBed;
const HOST = 'guarded.127.0.0.1';
const P = '/v1/apps/guarded/protection';

const basic = (password: string) => ({
  authorization: `Basic ${Buffer.from(`anyone:${password}`).toString('base64')}`,
});

/** The path and query of a URL the API answered (WHATWG's URL refuses `app.127.0.0.1`). */
const pathOf = (url: string) => url.replace(/^http:\/\/[^/]+/, '');

beforeAll(async () => {
  if (!canRunMachines) return;
  bed = await startMachineBed('pp', 60);
  const image = await bed.image('guarded:1', {
    layers: [
      busyboxLayer(),
      [{ path: 'www/' }, { path: 'www/index.html', content: 'the guarded app\n' }],
    ],
    config: { Cmd: ['/bin/httpd', '-f', '-p', '3000', '-h', '/www'] },
  });
  expect((await bed.req('POST', '/v1/apps', { name: 'guarded' })).status).toBe(201);
  const m = await bed.req('POST', '/v1/apps/guarded/machines', { image });
  expect(m.status, JSON.stringify(m.body)).toBe(201);
}, 180_000);

afterAll(async () => {
  if (bed) await bed.close();
});

describe.skipIf(!canRunMachines)('app protection', () => {
  it('is public by default', async () => {
    const res = await bed.req('GET', P);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ mode: 'public', links: [], header: 'Pier-Access-Token' });
    expect((await viaProxy(bed, HOST, '/index.html')).text).toBe('the guarded app\n');
    expect((await bed.req('POST', `${P}/rotate`)).body.code).toBe('not-protected');
    const link = await bed.req('POST', `${P}/links`, { label: 'x' });
    expect([link.status, link.body.code]).toEqual([409, 'not-protected']);
    const token = await bed.req('POST', `${P}/tokens`, {});
    expect([token.status, token.body.code]).toEqual([409, 'not-signed']);
  });

  it('password mode: Basic, the form and its cookie, WebSocket upgrades', async () => {
    const set = await bed.req('PUT', P, { mode: 'password' });
    expect(set.status, JSON.stringify(set.body)).toBe(200);
    expect(set.body).toMatchObject({ mode: 'password', passwordSet: true });
    const password: string = set.body.password;
    expect(password.length).toBeGreaterThanOrEqual(20);
    expect((await bed.req('GET', P)).body.password).toBeUndefined();

    const none = await viaProxy(bed, HOST, '/index.html');
    expect(none.status).toBe(401);
    expect(none.headers['www-authenticate']).toMatch(/^Basic realm="guarded"/);
    expect(JSON.parse(none.text).code).toBe('unauthenticated');
    expect((await viaProxy(bed, HOST, '/index.html', { headers: basic('wrong') })).status).toBe(
      401,
    );
    const right = await viaProxy(bed, HOST, '/index.html', { headers: basic(password) });
    expect([right.status, right.text]).toEqual([200, 'the guarded app\n']);

    // Browsers get the form; posting it sets the cookie, which then lets them in.
    const page = await viaProxy(bed, HOST, '/index.html', { headers: { accept: 'text/html' } });
    expect(page.status).toBe(401);
    expect(page.text).toContain('action="/.pier/login"');
    const form = { 'content-type': 'application/x-www-form-urlencoded' };
    const wrong = await viaProxy(bed, HOST, '/.pier/login', {
      method: 'POST',
      headers: form,
      body: 'password=nope&next=%2Findex.html',
    });
    expect(wrong.status).toBe(401);
    const login = await viaProxy(bed, HOST, '/.pier/login', {
      method: 'POST',
      headers: form,
      body: `password=${encodeURIComponent(password)}&next=%2Findex.html`,
    });
    expect(login.status).toBe(303);
    expect(login.headers.location).toBe('/index.html');
    const cookie = String(login.headers['set-cookie']);
    expect(cookie).toMatch(/^pier_access=c1\.[^;]+; Path=\/; Max-Age=\d+; HttpOnly; SameSite=Lax$/);
    const jar = { cookie: cookie.split(';')[0]! };
    expect((await viaProxy(bed, HOST, '/index.html', { headers: jar })).status).toBe(200);
    const forged = { cookie: jar.cookie.slice(0, -3) + 'AAA' };
    expect((await viaProxy(bed, HOST, '/index.html', { headers: forged })).status).toBe(401);
    // An open redirect is not possible through `next`.
    const away = await viaProxy(bed, HOST, '/.pier/login', {
      method: 'POST',
      headers: form,
      body: `password=${encodeURIComponent(password)}&next=%2F%2Fevil.example`,
    });
    expect(away.headers.location).toBe('/');

    expect(await upgradeStatus(bed, HOST)).toBe(401);
    expect(await upgradeStatus(bed, HOST, basic(password))).not.toBe(401);

    // Rotating gives a new password; the old one and the old cookie stop working.
    const rotated = await bed.req('POST', `${P}/rotate`);
    expect(rotated.status).toBe(200);
    expect(rotated.body.password).not.toBe(password);
    expect((await viaProxy(bed, HOST, '/index.html', { headers: basic(password) })).status).toBe(
      401,
    );
    expect((await viaProxy(bed, HOST, '/index.html', { headers: jar })).status).toBe(401);
    const fresh = basic(rotated.body.password);
    expect((await viaProxy(bed, HOST, '/index.html', { headers: fresh })).status).toBe(200);

    // A password of the caller's choosing.
    const chosen = await bed.req('PUT', P, { mode: 'password', password: 'correct horse' });
    expect(chosen.body.password).toBeUndefined();
    const ok = await viaProxy(bed, HOST, '/index.html', { headers: basic('correct horse') });
    expect(ok.status).toBe(200);
  });

  it('signed mode: links and tokens, expiry, revocation, rotation', async () => {
    const set = await bed.req('PUT', P, { mode: 'signed' });
    expect(set.body).toMatchObject({ mode: 'signed', passwordSet: false });
    expect((await viaProxy(bed, HOST, '/index.html')).status).toBe(401);
    expect(
      (await viaProxy(bed, HOST, '/index.html', { headers: basic('correct horse') })).status,
    ).toBe(401);

    const link = await bed.req('POST', `${P}/links`, { label: 'for the reviewers' });
    expect(link.status, JSON.stringify(link.body)).toBe(201);
    expect(link.body).toMatchObject({ label: 'for the reviewers' });
    expect(link.body.url).toMatch(/^http:\/\/guarded\.127\.0\.0\.1(:\d+)?\/\?pier_access=l1\./);
    const listed = await bed.req('GET', P);
    expect(listed.body.links.map((l: { id: string }) => l.id)).toEqual([link.body.id]);

    // Visiting the link sets the cookie and redirects to the path without the parameter.
    const visit = await viaProxy(bed, HOST, pathOf(link.body.url));
    expect(visit.status).toBe(303);
    expect(visit.headers.location).toBe('/');
    const jar = { cookie: String(visit.headers['set-cookie']).split(';')[0]! };
    expect((await viaProxy(bed, HOST, '/index.html', { headers: jar })).status).toBe(200);
    expect(await upgradeStatus(bed, HOST)).toBe(401);
    expect(await upgradeStatus(bed, HOST, jar)).not.toBe(401);

    // A token in its header, and its URL.
    const token = await bed.req('POST', `${P}/tokens`, {
      ttlSeconds: 600,
      sub: 'ci',
      next: '/index.html',
    });
    expect(token.status, JSON.stringify(token.body)).toBe(201);
    expect(token.body.header).toBe('Pier-Access-Token');
    const viaHeader = await viaProxy(bed, HOST, '/index.html', {
      headers: { [token.body.header]: token.body.token },
    });
    expect([viaHeader.status, viaHeader.text]).toEqual([200, 'the guarded app\n']);
    const viaUrl = await viaProxy(bed, HOST, pathOf(token.body.url));
    expect([viaUrl.status, viaUrl.headers.location]).toEqual([303, '/index.html']);
    const tampered = token.body.token.replace(/\.(\d+)\./, (_: string, e: string) => `.${+e + 1}.`);
    const bad = await viaProxy(bed, HOST, '/index.html', {
      headers: { 'Pier-Access-Token': tampered },
    });
    expect(bad.status).toBe(401);

    // Expired: a one-second token, a moment later.
    const short = await bed.req('POST', `${P}/tokens`, { ttlSeconds: 1 });
    await new Promise((r) => setTimeout(r, 2100));
    const late = await viaProxy(bed, HOST, '/', {
      headers: { 'Pier-Access-Token': short.body.token },
    });
    expect(late.status).toBe(401);

    // Revoked at once: the link and the cookie it handed out.
    expect((await bed.req('DELETE', `${P}/links/${link.body.id}`)).status).toBe(204);
    expect((await bed.req('DELETE', `${P}/links/${link.body.id}`)).status).toBe(404);
    expect((await viaProxy(bed, HOST, pathOf(link.body.url))).status).toBe(401);
    expect((await viaProxy(bed, HOST, '/index.html', { headers: jar })).status).toBe(401);

    // Rotation: tokens and links signed before are refused.
    const link2 = await bed.req('POST', `${P}/links`, { label: 'second' });
    expect((await viaProxy(bed, HOST, pathOf(link2.body.url))).status).toBe(303);
    expect((await bed.req('POST', `${P}/rotate`)).status).toBe(200);
    expect((await viaProxy(bed, HOST, pathOf(link2.body.url))).status).toBe(401);
    const after = await viaProxy(bed, HOST, '/index.html', {
      headers: { 'Pier-Access-Token': token.body.token },
    });
    expect(after.status).toBe(401);
    const newToken = await bed.req('POST', `${P}/tokens`, {});
    const works = await viaProxy(bed, HOST, '/index.html', {
      headers: { 'Pier-Access-Token': newToken.body.token },
    });
    expect(works.status).toBe(200);
  });

  it('an expired link is refused', async () => {
    const soon = new Date(Date.now() + 1500).toISOString();
    const link = await bed.req('POST', `${P}/links`, { label: 'brief', expiresAt: soon });
    expect(link.status).toBe(201);
    expect((await viaProxy(bed, HOST, pathOf(link.body.url))).status).toBe(303);
    await new Promise((r) => setTimeout(r, 2100));
    expect((await viaProxy(bed, HOST, pathOf(link.body.url))).status).toBe(401);
  });

  it('refuses bad input, with every problem at once', async () => {
    const cases: [string, string, unknown, string[]][] = [
      ['PUT', P, { mode: 'secret' }, ['mode']],
      ['PUT', P, { mode: 'password', password: 'short' }, ['password']],
      // The docs' minimum: 12 characters.
      ['PUT', P, { mode: 'password', password: 'x'.repeat(11) }, ['password']],
      ['PUT', P, { mode: 'signed', password: 'long enough' }, ['password']],
      ['PUT', P, { mode: 'public', extra: 1 }, ['']],
      ['POST', `${P}/links`, { label: '' }, ['label']],
      ['POST', `${P}/links`, { label: 'x'.repeat(65), expiresAt: 'soon' }, ['label', 'expiresAt']],
      ['POST', `${P}/links`, { label: 'past', expiresAt: '2020-01-01T00:00:00Z' }, ['expiresAt']],
      ['POST', `${P}/tokens`, { ttlSeconds: 0, sub: '' }, ['ttlSeconds', 'sub']],
      ['POST', `${P}/tokens`, { ttlSeconds: 86401, next: 'x'.repeat(513) }, ['ttlSeconds', 'next']],
      ['POST', `${P}/tokens`, { next: '//evil.example/' }, ['next']],
    ];
    for (const [method, path, body, fields] of cases) {
      const res = await bed.req(method, path, body);
      expect(res.status, `${method} ${JSON.stringify(body)}`).toBe(400);
      expect(res.body.code).toBe('bad-request');
      for (const f of fields) {
        if (f) expect(res.body.issues.map((i: { path: string }) => i.path)).toContain(f);
      }
    }
  });

  it("another organization's app answers like a missing one; keys are judged", async () => {
    const other = await bed.tp.createOrg();
    const as = (method: string, path: string, body?: unknown) =>
      bed.req(method, path, body, other.token);
    for (const [method, path, body] of [
      ['GET', P],
      ['PUT', P, { mode: 'public' }],
      ['POST', `${P}/rotate`],
      ['POST', `${P}/links`, { label: 'x' }],
      ['DELETE', `${P}/links/lnk-nope`],
      ['POST', `${P}/tokens`, {}],
    ] as [string, string, unknown][]) {
      const res = await as(method, path, body);
      expect(res.status, `${method} ${path}`).toBe(404);
      expect(res.body.code).toBe('not-found');
      const missing = await bed.req(method, path.replace('guarded', 'nowhere'), body);
      expect(missing.status).toBe(404);
    }
    const reader = await keyOf(bed, { scopes: ['read'] });
    expect((await bed.req('GET', P, undefined, reader)).status).toBe(200);
    const refused = await bed.req('PUT', P, { mode: 'public' }, reader);
    expect([refused.status, refused.body.code]).toEqual([403, 'token-scope']);
    const limited = await keyOf(bed, { agent: { class: 'sandbox', apps: ['elsewhere'] } });
    const outside = await bed.req('POST', `${P}/rotate`, undefined, limited);
    expect([outside.status, outside.body.code]).toEqual([403, 'agent-token-app-scope']);
    const prod = await keyOf(bed, { agent: { class: 'production', apps: ['guarded'] } });
    const ro = await bed.req('PUT', P, { mode: 'public' }, prod);
    expect([ro.status, ro.body.code]).toEqual([403, 'agent-token-production-readonly']);
    expect((await bed.req('GET', P, undefined, prod)).status).toBe(200);
  });

  it('a new password, or a switch of mode, ends the cookies handed out before it', async () => {
    const form = { 'content-type': 'application/x-www-form-urlencoded' };
    const login = async (password: string) => {
      const res = await viaProxy(bed, HOST, '/.pier/login', {
        method: 'POST',
        headers: form,
        body: `password=${encodeURIComponent(password)}&next=%2Findex.html`,
      });
      expect(res.status).toBe(303);
      return { cookie: String(res.headers['set-cookie']).split(';')[0]! };
    };
    const status = async (jar: Record<string, string>) =>
      (await viaProxy(bed, HOST, '/index.html', { headers: jar })).status;

    expect((await bed.req('PUT', P, { mode: 'password', password: 'first password' })).status).toBe(
      200,
    );
    const first = await login('first password');
    expect(await status(first)).toBe(200);
    const link = await bed.req('POST', `${P}/links`, { label: 'lives on' });
    const visit = await viaProxy(bed, HOST, pathOf(link.body.url));
    const linkJar = { cookie: String(visit.headers['set-cookie']).split(';')[0]! };
    expect(await status(linkJar)).toBe(200);

    // A new password: the cookie of the old one is refused at once.
    expect(
      (await bed.req('PUT', P, { mode: 'password', password: 'second password' })).status,
    ).toBe(200);
    expect(await status(first)).toBe(401);
    const second = await login('second password');
    expect(await status(second)).toBe(200);

    // Signed mode: password cookies end; the link's cookie lives on, as the link does.
    expect((await bed.req('PUT', P, { mode: 'signed' })).status).toBe(200);
    expect(await status(second)).toBe(401);
    expect(await status(linkJar)).toBe(200);
    const token = await bed.req('POST', `${P}/tokens`, { next: '/index.html' });
    const viaToken = await viaProxy(bed, HOST, pathOf(token.body.url));
    const tokenJar = { cookie: String(viaToken.headers['set-cookie']).split(';')[0]! };
    expect(await status(tokenJar)).toBe(200);

    // And back to a password: the token's cookie ends too.
    expect((await bed.req('PUT', P, { mode: 'password', password: 'third password' })).status).toBe(
      200,
    );
    expect(await status(tokenJar)).toBe(401);
    expect(await status(linkJar)).toBe(200);
  });

  it('redirects never leave the app host', async () => {
    const link = await bed.req('POST', `${P}/links`, { label: 'redirects' });
    const param = pathOf(link.body.url).replace(/^\/\?/, '');
    const targets = [
      `//evil.example/landing?${param}`,
      `///evil.example/landing?${param}`,
      `/\\evil.example/landing?${param}`,
      `/%2F%2Fevil.example/landing?${param}`,
      `/..//evil.example/landing?${param}`,
      `http://evil.example/landing?${param}`,
    ];
    for (const target of targets) {
      const res = await viaProxy(bed, HOST, target);
      expect(res.status, target).toBe(303);
      const location = String(res.headers.location);
      expect(location, target).toMatch(/^\/(?![/\\])/);
      // (Resolved as a browser would; WHATWG's URL refuses `guarded.127.0.0.1` as a base.)
      expect(new URL(location, 'http://guarded.pier.test/').host, target).toBe('guarded.pier.test');
    }
    expect((await viaProxy(bed, HOST, targets[0]!)).headers.location).toBe('/evil.example/landing');
    // The form's `next` too, however it is spelled.
    const form = { 'content-type': 'application/x-www-form-urlencoded' };
    for (const next of [
      '//evil.example',
      '/\\evil.example',
      'http://evil.example/x',
      '/..//evil',
    ]) {
      const res = await viaProxy(bed, HOST, '/.pier/login', {
        method: 'POST',
        headers: form,
        body: `password=third+password&next=${encodeURIComponent(next)}`,
      });
      expect(res.status, next).toBe(303);
      const location = String(res.headers.location);
      expect(location, next).toMatch(/^\/(?![/\\])/);
      expect(new URL(location, 'http://guarded.pier.test/').host, next).toBe('guarded.pier.test');
    }
  });

  it('password guesses are limited per address and per app (429, Retry-After)', async () => {
    const { perAddress, perApp } = PASSWORD_GUESSES;
    const guess = (from: string, password: string, host = HOST) =>
      viaProxy(bed, host, '/index.html', { headers: basic(password), from });
    const formGuess = (from: string, password: string) =>
      viaProxy(bed, HOST, '/.pier/login', {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'text/html' },
        body: `password=${encodeURIComponent(password)}&next=%2F`,
        from,
      });

    // One address: its wrong guesses, by Basic and the form, until the limit.
    const from = '127.0.0.21';
    for (let i = 0; i < perAddress.limit; i++) {
      const res = i % 2 ? await guess(from, `wrong ${i}`) : await formGuess(from, `wrong ${i}`);
      expect(res.status, `guess ${i}`).toBe(401);
    }
    for (const res of [
      await guess(from, 'wrong again'),
      await guess(from, 'third password'),
      await formGuess(from, 'third password'),
    ]) {
      expect(res.status).toBe(429);
      expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
      expect(Number(res.headers['retry-after'])).toBeLessThanOrEqual(perAddress.windowMs / 1000);
    }
    expect(JSON.parse((await guess(from, 'x')).text).code).toBe('rate-limited');
    expect((await formGuess(from, 'x')).text).toContain('Too many wrong passwords');
    // Another address is not held back by this one.
    expect((await guess('127.0.0.22', 'third password')).status).toBe(200);

    // One app, from many addresses: a second protected app (no machine needed: the gate
    // answers first), so its count starts at zero.
    expect((await bed.req('POST', '/v1/apps', { name: 'guessed' })).status).toBe(201);
    const set = await bed.req('PUT', '/v1/apps/guessed/protection', {
      mode: 'password',
      password: 'the right one',
    });
    expect(set.status).toBe(200);
    const other = 'guessed.127.0.0.1';
    let sent = 0;
    for (let a = 0; sent < perApp.limit; a++) {
      const wave = Math.min(perAddress.limit - 1, perApp.limit - sent);
      const answers = await Promise.all(
        Array.from({ length: wave }, (_, i) => guess(`127.0.1.${a + 1}`, `no ${i}`, other)),
      );
      expect(answers.map((r) => r.status)).toEqual(Array(wave).fill(401));
      sent += wave;
    }
    const late = await guess('127.0.2.1', 'the right one', other);
    expect(late.status).toBe(429);
    expect(Number(late.headers['retry-after'])).toBeGreaterThan(0);
    // The first app is counted on its own.
    expect((await guess('127.0.2.2', 'third password')).status).toBe(200);
  }, 120_000);

  it('guesses wait their turn for scrypt; the server keeps answering meanwhile', async () => {
    const guesses = Array.from({ length: 8 }, (_, i) =>
      viaProxy(bed, HOST, '/index.html', { headers: basic(`slow ${i}`), from: '127.0.3.1' }).then(
        () => Date.now(),
      ),
    );
    const started = Date.now();
    const health = await bed.tp.request('GET', '/healthz');
    const answeredAt = Date.now();
    expect(health.status).toBe(200);
    const done = await Promise.all(guesses);
    // Eight hashes two at a time take several scrypt rounds; the health check took none.
    expect(answeredAt).toBeLessThan(Math.max(...done));
    expect(answeredAt - started).toBeLessThan(Math.max(...done) - started);
  });

  it('public again: the app answers everyone', async () => {
    const res = await bed.req('PUT', P, { mode: 'public' });
    expect(res.body).toMatchObject({ mode: 'public', links: [] });
    expect((await viaProxy(bed, HOST, '/index.html')).status).toBe(200);
  });
});
