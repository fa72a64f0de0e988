/**
 * Cookie tossing in a real browser (Debian chromium) against a real pier with real
 * machines. pier's public host is a real name (`pier.example.com`, mapped to loopback in
 * the browser), so apps at `<app>.pier.example.com` share the console's site and the
 * browser itself would accept their `Domain=pier.example.com` cookies. A hostile app
 * answers (a CGI of busybox httpd, through the proxy) `Set-Cookie: pier_console=<the
 * attacker's own console key>; Domain=pier.example.com; Path=/console`, and a
 * `pier_access` cookie for every app with a path longer than theirs. The console's
 * visitor stays signed in as themself, and their access to another, protected app (opened
 * with a signed link, whose cookie is host-only on that app's host) holds.
 */
import net from 'node:net';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { busyboxLayer } from '../../src/runtime/images/build.test-helper.js';
import { launchBrowser, signIn, type TestBrowser } from '../console/browser.js';
import { addPerson, PASSWORD } from '../console/console-client.js';
import { canRunMachines, startMachineBed, type MachineBed } from '../machines/bed.js';

const PUBLIC_HOST = 'pier.example.com';
const VISITOR = 'visitor@example.com';
const ATTACKER = 'attacker@example.com';
const VICTIM_PASSWORD = 'the victim app password';

let bed: MachineBed;
let browser: TestBrowser;
let page: Page;
let port: number;
/** A signed link of the protected app (headless chromium answers Basic's 401 with an error). */
let linkPath: string;
/** Machines made (id, their organization's key). */
const machines: [string, string][] = [];
const console_ = () => `http://${PUBLIC_HOST}:${port}`;
const appUrl = (app: string, path: string) => `http://${app}.${PUBLIC_HOST}:${port}${path}`;

async function freePort(): Promise<number> {
  const server = net.createServer().listen(0, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  const { port: p } = server.address() as net.AddressInfo;
  await new Promise((r) => server.close(r));
  return p;
}

/** The hostile app's CGI: every cookie it may try on its neighbours. */
function tosser(attackerKey: string): string {
  const lines = [
    `pier_console=${attackerKey}; Domain=${PUBLIC_HOST}; Path=/console`,
    `pier_console=${attackerKey}; domain=.PIER.example.com; Path=/console/apps`,
    `pier_access=planted; Domain=${PUBLIC_HOST}; Path=/index.html`,
    `pier_access=planted; Domain=victim.${PUBLIC_HOST}; Path=/`,
  ];
  return (
    '#!/bin/sh\n' +
    "printf 'Content-Type: text/html\\r\\n'\n" +
    lines.map((l) => `printf 'Set-Cookie: ${l}\\r\\n'\n`).join('') +
    "printf '\\r\\n'\necho '<p id=tossed>tossed</p>'\n"
  );
}

beforeAll(async () => {
  if (!canRunMachines) return;
  // Every name to loopback: the browser resolves pier.example.com and its apps to pier.
  const launched = launchBrowser(['--host-resolver-rules=MAP * 127.0.0.1']);
  // The public URL names the port, so it is chosen first; another listener (of any test)
  // may take it before pier binds it: then another is chosen.
  for (let tries = 1; ; tries++) {
    port = await freePort();
    try {
      bed = await startMachineBed('ck', 40, {
        listen: `127.0.0.1:${port}`,
        publicUrl: `http://${PUBLIC_HOST}:${port}`,
      });
      break;
    } catch (err) {
      if (tries >= 3 || !/EADDRINUSE/.test(String(err))) {
        await (await launched).close();
        throw err;
      }
    }
  }
  browser = await launched;
  await addPerson(bed.tp, bed.org.id, VISITOR);
  const other = await bed.tp.createOrg({ name: 'Attackers' });
  await addPerson(bed.tp, other.id, ATTACKER);
  const signedIn = await bed.tp.request('POST', '/console/api/sign-in', {
    body: { email: ATTACKER, password: PASSWORD },
  });
  expect(signedIn.status).toBe(200);

  const image = await bed.image('tosser:1', {
    layers: [
      busyboxLayer(),
      [
        { path: 'www/' },
        { path: 'www/index.html', content: 'the victim app\n' },
        { path: 'www/cgi-bin/' },
        { path: 'www/cgi-bin/toss', content: tosser(signedIn.body.token), mode: 0o755 },
      ],
    ],
    config: { Cmd: ['/bin/httpd', '-f', '-p', '3000', '-h', '/www'] },
  });
  const req = (method: string, path: string, body: unknown, token: string) =>
    bed.tp.request(method, path, { token, body });
  // The attacker's app and the visitor's protected app, each on a machine of its own.
  for (const [app, token] of [
    ['tosser', other.token],
    ['victim', bed.org.token],
  ] as const) {
    expect((await req('POST', '/v1/apps', { name: app }, token)).status).toBe(201);
    const m = await req('POST', `/v1/apps/${app}/machines`, { image }, token);
    expect(m.status, JSON.stringify(m.body)).toBe(201);
    machines.push([m.body.id, token]);
  }
  const p = await req(
    'PUT',
    '/v1/apps/victim/protection',
    { mode: 'password', password: VICTIM_PASSWORD },
    bed.org.token,
  );
  expect(p.status).toBe(200);
  const link = await req('POST', '/v1/apps/victim/protection/links', { label: 'v' }, bed.org.token);
  expect(link.status).toBe(201);
  linkPath = String(link.body.url).replace(/^http:\/\/[^/]+/, '');
  page = await browser.page();
}, 180_000);

afterAll(async () => {
  await browser?.close();
  // The bed destroys its own organization's machines; the attacker's are ours to end.
  for (const [id, token] of machines) {
    await bed?.tp.request('POST', `/v1/machines/${id}/destroy`, { token });
  }
  await bed?.close();
});

describe.skipIf(!canRunMachines)('an app’s hostile cookies', () => {
  it('change nothing for the console or another app', async () => {
    await signIn(page, console_(), VISITOR);
    await page.goto(`${console_()}/console/apps`);
    expect(await page.content()).toContain(VISITOR);

    // The visitor opens the protected app through a signed link (which sets its cookie).
    await page.goto(appUrl('victim', linkPath));
    await page.goto(appUrl('victim', '/index.html'));
    expect(await page.textContent('body')).toContain('the victim app');

    // Then visits the hostile app.
    const tossed = await page.goto(appUrl('tosser', '/cgi-bin/toss'));
    expect(tossed?.status()).toBe(200);
    expect(await page.textContent('#tossed')).toBe('tossed');
    const cookies = await page.context().cookies();
    // Whatever the app set stayed on its own host.
    for (const c of cookies.filter((c) => c.value === 'planted' || c.name === 'pier_console')) {
      if (c.domain !== PUBLIC_HOST)
        expect(c.domain, JSON.stringify(c)).toBe(`tosser.${PUBLIC_HOST}`);
    }
    expect(cookies.filter((c) => c.domain.startsWith('.'))).toEqual([]);

    // The console: still the visitor, on every path.
    for (const path of ['/console/apps', '/console']) {
      await page.goto(`${console_()}${path}`);
      expect(new URL(page.url()).pathname).not.toBe('/console/sign-in');
      const html = await page.content();
      expect(html).toContain(VISITOR);
      expect(html).not.toContain(ATTACKER);
      expect(html).not.toContain('Attackers');
    }
    // The protected app: still open to the visitor.
    const again = await page.goto(appUrl('victim', '/index.html'));
    expect(again?.status()).toBe(200);
    expect(await page.textContent('body')).toContain('the victim app');
  }, 120_000);
});
