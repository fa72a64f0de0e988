/**
 * The console's consent page in a real browser (Debian chromium): a signed-out person
 * opening a client's authorize URL signs in and comes back to the page, approves with a
 * choice (class and one app), and lands on the client's loopback redirect URI with
 * `code`, `state` and `iss`; the grant then shows in the MCP clients page and is revoked
 * there.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type * as oauth from 'oauth4webapi';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTestPlatform, type TestOrg, type TestPlatform } from '../helpers/platform.js';
import {
  collectCspViolations,
  fillSignIn,
  launchBrowser,
  screenshot,
  type TestBrowser,
} from '../console/browser.js';
import { addPerson } from '../console/console-client.js';
import { discover, exchange, register, startLogin } from './helpers.js';

const EMAIL = 'ada@example.com';

let tp: TestPlatform;
let org: TestOrg;
let browser: TestBrowser;
let callbackServer: http.Server;
let redirectUri: string;
/** The callbacks the loopback client received, in order. */
const callbacks: URL[] = [];
let arrived: (u: URL) => void = () => undefined;

beforeAll(async () => {
  [tp, browser] = await Promise.all([startTestPlatform(), launchBrowser()]);
  org = await tp.createOrg({ name: 'Consent Org' });
  await addPerson(tp, org.id, EMAIL);
  for (const name of ['page-web', 'page-api']) {
    await tp.request('POST', '/v1/apps', { token: org.token, body: { name } });
  }
  // The desktop client's loopback listener (RFC 8252).
  callbackServer = http.createServer((req, res) => {
    const url = new URL(req.url!, redirectUri);
    callbacks.push(url);
    arrived(url);
    res.writeHead(200, { 'content-type': 'text/plain' }).end('You can close this tab.');
  });
  await new Promise<void>((r) => callbackServer.listen(0, '127.0.0.1', r));
  redirectUri = `http://127.0.0.1:${(callbackServer.address() as AddressInfo).port}/callback`;
});
afterAll(async () => {
  await browser?.close();
  await new Promise((r) => callbackServer?.close(r));
  await tp?.close();
});

it('signs in, approves with a choice and sends the browser back to the client', async () => {
  const as: oauth.AuthorizationServer = await discover(tp.url);
  const client = await register(as, redirectUri, { client_name: 'Desk Client' });
  const login = await startLogin(as, client, redirectUri);

  const page = await browser.page();
  const violations = collectCspViolations(page);
  await page.goto(login.authorizeUrl);
  expect(new URL(page.url()).pathname).toBe('/console/sign-in');
  await fillSignIn(page, EMAIL);
  expect(new URL(page.url()).pathname).toBe('/console/oauth/consent');

  await expect(page.locator('.client-name').textContent()).resolves.toBe('Desk Client');
  await expect(page.locator('.client-verified').textContent()).resolves.toContain('no');
  await expect(page.locator('.redirect-host').textContent()).resolves.toBe(
    new URL(redirectUri).host,
  );
  expect(await page.isChecked('input[name=agentClass][value=production]')).toBe(true);
  await screenshot(page, 'oauth-consent');

  await page.check('input[name=agentClass][value=twin]');
  await page.check('input[name="app.page-web"]');
  const back = new Promise<URL>((r) => (arrived = r));
  await page.click('button[value=approve]');
  const callback = await back;
  await page.waitForURL((u) => u.href.startsWith(redirectUri));
  expect(callback.searchParams.get('state')).toBe(login.state);
  expect(callback.searchParams.get('iss')).toBe(tp.url);
  expect(callback.searchParams.get('code')).toMatch(/^pierc_/);

  const tokens = await exchange(as, client, callback, login, redirectUri);
  expect(tokens.access_token).toMatch(/^pier_/);

  await page.goto(`${tp.url}/console/oauth/grants`);
  const row = page.locator('table.grants tbody tr');
  await expect(row.textContent()).resolves.toContain('twin');
  await expect(row.textContent()).resolves.toContain('page-web');
  await screenshot(page, 'oauth-grants');
  page.once('dialog', (d) => void d.accept());
  await Promise.all([page.waitForLoadState('load'), row.locator('button.danger').click()]);
  await page.waitForSelector('text=No connected clients.');
  const gone = await tp.request('GET', '/v1/apps', { token: tokens.access_token });
  expect(gone.status).toBe(401);
  expect(violations).toEqual([]);
  await page.close();
});
