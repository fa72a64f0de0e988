/**
 * The console's forms and routes over real HTTP, without a browser: headers, the
 * session cookie, CSRF and origin refusals, the sign-in limit, sign-out revoking the key,
 * and another organization's objects answering like missing ones.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONTENT_SECURITY_POLICY } from '../../src/console/index.js';
import { startTestPlatform, type TestOrg, type TestPlatform } from '../helpers/platform.js';
import { addPerson, ConsoleVisitor, PASSWORD } from './console-client.js';

let tp: TestPlatform;
let org: TestOrg;
let other: TestOrg;
const EMAIL = 'ada@example.com';

beforeAll(async () => {
  tp = await startTestPlatform();
  org = await tp.createOrg({ name: 'Console HTTP Org' });
  other = await tp.createOrg({ name: 'Someone Else' });
  await addPerson(tp, org.id, EMAIL);
  const made = await tp.request('POST', '/v1/apps', {
    token: other.token,
    body: { name: 'theirs-ch' },
  });
  expect(made.status).toBe(201);
});
afterAll(async () => tp?.close());

async function signedIn(): Promise<ConsoleVisitor> {
  const v = new ConsoleVisitor(tp);
  const res = await v.signIn(EMAIL);
  expect(res.status).toBe(303);
  return v;
}

describe('console pages', () => {
  it('send the strict CSP and companion headers on every page', async () => {
    const v = new ConsoleVisitor(tp);
    const page = await v.get('/console/sign-in');
    expect(page.status).toBe(200);
    expect(page.headers.get('content-security-policy')).toBe(CONTENT_SECURITY_POLICY);
    expect(CONTENT_SECURITY_POLICY).toContain("script-src 'self'");
    expect(CONTENT_SECURITY_POLICY).not.toContain('unsafe-inline');
    expect(page.headers.get('x-content-type-options')).toBe('nosniff');
    expect(page.headers.get('referrer-policy')).toBe('same-origin');
    // No inline script or style anywhere in the markup.
    expect(page.text).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/);
    expect(page.text).not.toMatch(/<style|\sstyle=/);

    const signed = await signedIn();
    const apps = await signed.get('/console/apps');
    expect(apps.status).toBe(200);
    expect(apps.headers.get('content-security-policy')).toBe(CONTENT_SECURITY_POLICY);
    expect(apps.headers.get('cache-control')).toBe('no-store');
    expect(apps.text).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/);
  });

  it('serve assets under a versioned URL with a long cache', async () => {
    const page = await (await signedIn()).get('/console/apps');
    const src = /src="(\/console\/assets\/[0-9a-f]{12}\/htmx\.min\.js)"/.exec(page.text)?.[1];
    expect(src).toBeDefined();
    const res = await fetch(tp.url + src!);
    expect(res.status).toBe(200);
    expect(res.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    expect(res.headers.get('content-type')).toMatch(/^text\/javascript/);
    const stale = await fetch(tp.url + src!.replace(/assets\/[0-9a-f]{12}/, 'assets/000000000000'));
    expect(stale.status).toBe(404);
  });

  it('send a signed-out visitor to sign in, and back afterwards', async () => {
    const v = new ConsoleVisitor(tp);
    const res = await v.get('/console/apps?x=1');
    expect(res.status).toBe(303);
    expect(res.headers.get('location')).toBe('/console/sign-in?next=%2Fconsole%2Fapps%3Fx%3D1');
    const form = await v.get(res.headers.get('location')!);
    expect(form.text).toContain('value="/console/apps?x=1"');
    const signed = await v.post('/console/sign-in', {
      email: EMAIL,
      password: PASSWORD,
      next: '/console/apps?x=1',
    });
    expect(signed.status).toBe(303);
    expect(signed.headers.get('location')).toBe('/console/apps?x=1');
    // A next that leaves the console is ignored.
    const away = await new ConsoleVisitor(tp).post('/console/sign-in', {
      email: EMAIL,
      password: PASSWORD,
      next: '//evil.example/console',
    });
    expect(away.headers.get('location')).toBe('/console');
  });

  it('show the person and organization', async () => {
    const page = await (await signedIn()).get('/console/apps');
    expect(page.text).toContain(EMAIL);
    expect(page.text).toContain('Console HTTP Org');
    expect(page.text).toContain('curl &quot;$PIER_API_URL/v1/apps&quot;');
  });
});

describe('the session cookie', () => {
  it('is HttpOnly, SameSite=Lax, Path=/console, not Secure over plain HTTP', async () => {
    const v = new ConsoleVisitor(tp);
    const res = await v.signIn(EMAIL);
    const set = res.headers.get('set-cookie')!;
    expect(set).toMatch(/^pier_console=[^;]+;/);
    expect(set).toContain('HttpOnly');
    expect(set).toContain('SameSite=Lax');
    expect(set).toContain('Path=/console');
    expect(set).toMatch(/Max-Age=4\d{4}/);
    expect(set).not.toContain('Secure');
    // The cookie holds a working console key of the person.
    const me = await tp.request('GET', '/console/api/me', { token: v.key! });
    expect(me.status).toBe(200);
    expect(me.body.user.email).toBe(EMAIL);
    expect(me.body.key.console).toBe(true);
  });

  it('over TLS is __Host-pier_console: Secure, Path=/, no Domain; no other name counts', async () => {
    const tls = await startTestPlatform({ publicUrl: 'https://console.example' });
    try {
      const o = await tls.createOrg();
      await addPerson(tls, o.id, 'tls@example.com');
      const v = new ConsoleVisitor(tls);
      const res = await v.post(
        '/console/sign-in',
        { email: 'tls@example.com', password: PASSWORD, next: '/console' },
        { origin: 'https://console.example' },
      );
      expect(res.status).toBe(303);
      const set = res.headers.get('set-cookie')!;
      // The prefix's rules (RFC 6265bis 4.1.3.2), or browsers would drop the cookie.
      expect(set).toMatch(/^__Host-pier_console=[^;]+;/);
      expect(set.split(/;\s*/)).toEqual(
        expect.arrayContaining(['Path=/', 'Secure', 'HttpOnly', 'SameSite=Lax']),
      );
      expect(set).not.toMatch(/domain/i);
      expect((await v.get('/console/apps')).status).toBe(200);
      // A cookie an app could plant (any other name, even with the right key) is no session.
      const planted = new ConsoleVisitor(tls);
      planted.cookie = `pier_console=${v.key!}`;
      expect((await planted.get('/console/apps')).status).toBe(303);
    } finally {
      await tls.close();
    }
  });

  it('two session cookies (one planted by a script) are no session, not the planted one', async () => {
    const mine = await signedIn();
    expect((await mine.get('/console/apps')).status).toBe(200);
    const theirs = new ConsoleVisitor(tp);
    const other = await tp.createOrg();
    await addPerson(tp, other.id, 'planter@example.com');
    await theirs.signIn('planter@example.com');
    for (const order of [
      [mine.cookie, theirs.cookie],
      [theirs.cookie, mine.cookie],
    ]) {
      const both = new ConsoleVisitor(tp);
      both.cookie = order.join('; ');
      const page = await both.get('/console/apps');
      expect(page.status).toBe(303);
      expect(page.headers.get('location')).toMatch(/^\/console\/sign-in/);
    }
  });
});

describe('CSRF and origin', () => {
  it('refuse a post without the CSRF token: 403 csrf-failed, nothing done', async () => {
    const v = await signedIn();
    const res = await v.post('/console/apps', { name: 'no-csrf' });
    expect(res.status).toBe(403);
    expect(JSON.parse(res.text).code).toBe('csrf-failed');
    const wrong = await v.post('/console/apps', { name: 'no-csrf', _csrf: 'x'.repeat(43) });
    expect(wrong.status).toBe(403);
    expect((await tp.request('GET', '/v1/apps/no-csrf', { token: org.token })).status).toBe(404);
  });

  it("refuse another session's token", async () => {
    const a = await signedIn();
    const b = await signedIn();
    const res = await a.post('/console/apps', { name: 'cross-session', _csrf: await b.csrf() });
    expect(res.status).toBe(403);
    expect(JSON.parse(res.text).code).toBe('csrf-failed');
  });

  it('refuse a post from another origin or site, even with the token', async () => {
    const v = await signedIn();
    const _csrf = await v.csrf();
    const evil = await v.post(
      '/console/apps',
      { name: 'cross-origin', _csrf },
      {
        origin: 'https://evil.example',
      },
    );
    expect(evil.status).toBe(403);
    expect(JSON.parse(evil.text).code).toBe('csrf-failed');
    const site = await v.post(
      '/console/apps',
      { name: 'cross-origin', _csrf },
      {
        'sec-fetch-site': 'cross-site',
      },
    );
    expect(site.status).toBe(403);
    expect((await tp.request('GET', '/v1/apps/cross-origin', { token: org.token })).status).toBe(
      404,
    );
  });

  it('let a same-origin post with the token through /v1', async () => {
    const v = await signedIn();
    const res = await v.post('/console/apps', { name: 'made-by-form', _csrf: await v.csrf() });
    expect(res.status).toBe(303);
    expect(res.headers.get('location')).toBe('/console/apps/made-by-form');
    const app = await tp.request('GET', '/v1/apps/made-by-form', { token: org.token });
    expect(app.status).toBe(200);
  });

  it("show the route's sentence and code when it refuses", async () => {
    const v = await signedIn();
    const res = await v.post('/console/apps', { name: 'Bad Name!', _csrf: await v.csrf() });
    expect(res.status).toBe(400);
    expect(res.text).toContain('400 bad-request');
    expect(res.text).toContain('name');
    const taken = await v.post('/console/apps', { name: 'theirs-ch', _csrf: await v.csrf() });
    expect(taken.status).toBe(409);
    expect(taken.text).toContain('name-taken');
  });
});

describe('previews page', () => {
  it('makes, lists and deletes a preview through /v1; another org’s app is a 404', async () => {
    expect(
      (await tp.request('POST', '/v1/apps', { token: org.token, body: { name: 'pv-ch' } })).status,
    ).toBe(201);
    const v = await signedIn();
    const made = await v.post('/console/apps/pv-ch/previews', {
      name: 'try',
      days: '2',
      _csrf: await v.csrf(),
    });
    expect(made.status, made.text).toBe(303);
    expect(made.headers.get('location')).toBe('/console/apps/pv-ch/previews');
    const api = await tp.request('GET', '/v1/apps/pv-ch/previews/try', { token: org.token });
    expect(api.body).toMatchObject({ appName: 'pv-ch--try' });
    const days = (new Date(api.body.expiresAt).getTime() - Date.now()) / 86_400_000;
    expect(days).toBeGreaterThan(1.99);
    expect(days).toBeLessThan(2.01);
    const page = await v.get('/console/apps/pv-ch/previews');
    expect(page.status).toBe(200);
    expect(page.text).toContain('pv-ch--try');
    const gone = await v.post('/console/apps/pv-ch/previews/try/delete', { _csrf: await v.csrf() });
    expect(gone.status).toBe(303);
    expect((await tp.request('GET', '/v1/apps/pv-ch/previews', { token: org.token })).body).toEqual(
      [],
    );
    expect((await v.get('/console/apps/theirs-ch/previews')).status).toBe(404);
  });

  it('shows where to push and the Git settings, and changes them through /v1', async () => {
    expect(
      (await tp.request('POST', '/v1/apps', { token: org.token, body: { name: 'git-ch' } })).status,
    ).toBe(201);
    const v = await signedIn();
    const page = await v.get('/console/apps/git-ch/previews');
    expect(page.status).toBe(200);
    expect(page.text).toContain(`${tp.url}/git/git-ch.git`);
    expect(page.text).toMatch(/ssh:\/\/git@127\.0\.0\.1:\d+\/git-ch\.git/);
    expect(page.text).toContain('data-production="main or master"');
    expect(page.text).toContain('data-previews="on"');
    const set = await v.post('/console/apps/git-ch/git', {
      productionBranch: 'trunk',
      branchPreviews: 'off',
      _csrf: await v.csrf(),
    });
    expect(set.status, set.text).toBe(303);
    expect(set.headers.get('location')).toBe('/console/apps/git-ch/previews');
    const api = await tp.request('GET', '/v1/apps/git-ch/git', { token: org.token });
    expect(api.body).toMatchObject({ productionBranch: 'trunk', branchPreviews: false });
    const after = await v.get('/console/apps/git-ch/previews');
    expect(after.text).toContain('data-production="trunk"');
    expect(after.text).toContain('data-previews="off"');
    // The route's refusal, with the field it names; nothing changes.
    const bad = await v.post('/console/apps/git-ch/git', {
      productionBranch: 'a..b',
      branchPreviews: 'maybe',
      _csrf: await v.csrf(),
    });
    expect(bad.status).toBe(400);
    expect(bad.text).toContain('productionBranch');
    expect(bad.text).toContain('branchPreviews');
    const back = await v.post('/console/apps/git-ch/git', {
      productionBranch: '',
      branchPreviews: 'on',
      _csrf: await v.csrf(),
    });
    expect(back.status).toBe(303);
    expect(
      (await tp.request('GET', '/v1/apps/git-ch/git', { token: org.token })).body,
    ).toMatchObject({ productionBranch: null, branchPreviews: true });
    const theirs = await v.post('/console/apps/theirs-ch/git', {
      productionBranch: '',
      branchPreviews: 'off',
      _csrf: await v.csrf(),
    });
    expect(theirs.status).toBe(404);
    expect(
      (await tp.request('GET', '/v1/apps/theirs-ch/git', { token: other.token })).body,
    ).toMatchObject({ branchPreviews: true });
  });
});

describe('another organization', () => {
  it('answers its app and machine like missing ones (404 page)', async () => {
    const v = await signedIn();
    const theirs = await v.get('/console/apps/theirs-ch');
    const missing = await v.get('/console/apps/never-was-ch');
    expect(theirs.status).toBe(404);
    expect(missing.status).toBe(404);
    const strip = (t: string) => t.replace(/theirs-ch|never-was-ch/g, 'X');
    expect(strip(theirs.text)).toBe(strip(missing.text));
    const machine = await v.get('/console/machines/mch-nothere');
    expect(machine.status).toBe(404);
  });
});

describe('device approval page', () => {
  it('shows the pending login and approves it through /v1', async () => {
    const code = await tp.request('POST', '/v1/device/code', {
      body: { client: 'pier-cli', version: '9.9.9' },
    });
    expect(code.status).toBe(201);
    const path =
      new URL(code.body.verificationUriComplete).pathname +
      new URL(code.body.verificationUriComplete).search;
    const v = await signedIn();
    const page = await v.get(path);
    expect(page.status).toBe(200);
    expect(page.text).toContain('pier-cli 9.9.9');
    expect(page.text).toContain(code.body.userCode);
    const approved = await v.post('/console/device', {
      userCode: code.body.userCode,
      decision: 'approve',
      _csrf: await v.csrf(),
    });
    expect(approved.status).toBe(200);
    expect(approved.text).toContain('Device approved');
    const token = await tp.request('POST', '/v1/device/token', {
      body: { deviceCode: code.body.deviceCode },
    });
    expect(token.status).toBe(200);
    expect(token.body.org.id).toBe(org.id);
  });
});

describe('GET /console/api/me', () => {
  it('says who a key is; a read-only key may ask, an agent token may not', async () => {
    const me = await tp.request('GET', '/console/api/me', { token: org.token });
    expect(me.status).toBe(200);
    expect(me.body.org).toEqual({ id: org.id, name: 'Console HTTP Org' });
    expect(me.body.key.console).toBe(false);
    const read = await tp.request('POST', '/v1/tokens', {
      token: org.token,
      body: { name: 'reader', scopes: ['read'] },
    });
    expect((await tp.request('GET', '/console/api/me', { token: read.body.token })).status).toBe(
      200,
    );
    const agent = await tp.request('POST', '/v1/tokens', {
      token: org.token,
      body: { name: 'agent', agent: { class: 'sandbox' } },
    });
    const refused = await tp.request('GET', '/console/api/me', { token: agent.body.token });
    expect(refused.status).toBe(403);
    expect(refused.body.code).toBe('agent-token-route-unknown');
    expect((await tp.request('GET', '/console/api/me')).status).toBe(401);
  });
});

describe('device denial', () => {
  it('declines the login: the CLI is told access-denied', async () => {
    const code = await tp.request('POST', '/v1/device/code', { body: { client: 'pier-cli' } });
    const v = await signedIn();
    const denied = await v.post('/console/device', {
      userCode: code.body.userCode,
      decision: 'deny',
      _csrf: await v.csrf(),
    });
    expect(denied.status).toBe(200);
    expect(denied.text).toContain('Device denied');
    const poll = await tp.request('POST', '/v1/device/token', {
      body: { deviceCode: code.body.deviceCode },
    });
    expect(poll.status).toBe(403);
    expect(poll.body.code).toBe('access-denied');
    // The code is used up: the page says so with the route's 404.
    const again = await v.get(`/console/device?userCode=${code.body.userCode}`);
    expect(again.status).toBe(404);
    expect(again.text).toContain('404 not-found');
  });
});

describe('sign-out', () => {
  it('revokes the console key and clears the cookie', async () => {
    const v = await signedIn();
    const key = v.key!;
    expect((await tp.request('GET', '/v1/apps', { token: key })).status).toBe(200);
    const out = await v.post('/console/sign-out', { _csrf: await v.csrf() });
    expect(out.status).toBe(303);
    expect(out.headers.get('set-cookie')).toMatch(/^pier_console=;.*Max-Age=0/);
    expect((await tp.request('GET', '/v1/apps', { token: key })).status).toBe(401);
    // The revoked key in a cookie is a signed-out visitor.
    const stale = new ConsoleVisitor(tp);
    stale.cookie = `pier_console=${key}`;
    expect((await stale.get('/console/apps')).status).toBe(303);
  });
});

describe('failed sign-ins', () => {
  it('are refused past 10 per address: 429 rate-limited with Retry-After', async () => {
    // A platform of its own: the other tests' sign-ins count against the sign-in route's
    // own per-address limit, and this one uses up the address's failures.
    const own = await startTestPlatform();
    try {
      const o = await own.createOrg();
      await addPerson(own, o.id, EMAIL);
      const v = new ConsoleVisitor(own);
      const wrong = await v.signIn(EMAIL, 'not the password');
      expect(wrong.status).toBe(401);
      expect(wrong.text).toContain('The email or password is wrong.');
      expect(wrong.text).toContain('unauthenticated');
      for (let i = 1; i < 10; i++) expect((await v.signIn(EMAIL, 'nope')).status).toBe(401);
      const limited = await v.signIn(EMAIL, 'nope');
      expect(limited.status).toBe(429);
      expect(limited.text).toContain('rate-limited');
      expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(500);
      // Even the right password waits now.
      expect((await v.signIn(EMAIL)).status).toBe(429);
    } finally {
      await own.close();
    }
  });

  it('count every address of an IPv6 /64 as one address, and another /64 apart', async () => {
    // This host has no IPv6 addresses but ::1 to send from: the console's own in-process
    // calls set the caller's address the same way (inject's remoteAddress), and so does
    // this test, on the real sign-in form and the real sign-in route.
    const own = await startTestPlatform();
    try {
      const o = await own.createOrg();
      await addPerson(own, o.id, EMAIL);
      const signIn = (from: string, password: string) =>
        own.platform.app.inject({
          method: 'POST',
          url: '/console/sign-in',
          remoteAddress: from,
          headers: { origin: own.url, 'content-type': 'application/x-www-form-urlencoded' },
          payload: new URLSearchParams({ email: EMAIL, password, next: '/console' }).toString(),
        });
      // Ten failures, each from a fresh address of one /64, as a guesser would draw them.
      for (let i = 1; i <= 10; i++) {
        expect((await signIn(`2001:db8:77:1::${i.toString(16)}`, 'nope')).statusCode).toBe(401);
      }
      const sameNet = await signIn('2001:db8:77:1:ffff:1:2:3', PASSWORD);
      expect(sameNet.statusCode).toBe(429);
      expect(sameNet.body).toContain('rate-limited');
      // The neighbouring /64 is another caller: the right password signs in.
      expect((await signIn('2001:db8:77:2::1', PASSWORD)).statusCode).toBe(303);

      // The sign-in route's own limit (30 a minute) counts the /64 too.
      const route = (from: string) =>
        own.platform.app.inject({
          method: 'POST',
          url: '/console/api/sign-in',
          remoteAddress: from,
          payload: { email: EMAIL, password: 'nope' },
        });
      for (let i = 1; i <= 30; i++) {
        expect((await route(`2001:db8:88:1::${i.toString(16)}`)).statusCode).toBe(401);
      }
      expect((await route('2001:db8:88:1::abcd')).statusCode).toBe(429);
      expect((await route('2001:db8:88:2::1')).statusCode).toBe(401);
    } finally {
      await own.close();
    }
    // 42 password checks (scrypt) on a shared 2-core machine: the test's own work, not a
    // deadline of pier's.
  }, 120_000);
});
