/**
 * The console in a real browser, without machines: signing in (and a wrong password
 * refused), signed-out visitors sent to sign in, approving a device login that the real
 * `pier login` started (the CLI receives its key), and a cross-site form post refused.
 */
import { readFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, type TestOrg, type TestPlatform } from '../helpers/platform.js';
import { ENTRY, cleanEnv, tempDir } from '../cli/run-cli.js';
import { execFile } from 'node:child_process';
import {
  collectCspViolations,
  fillSignIn,
  launchBrowser,
  screenshot,
  signIn,
  type TestBrowser,
} from './browser.js';
import { addPerson } from './console-client.js';

let tp: TestPlatform;
let org: TestOrg;
let browser: TestBrowser;
let tmp: Awaited<ReturnType<typeof tempDir>>;
const EMAIL = 'grace@example.com';

beforeAll(async () => {
  [tp, browser, tmp] = await Promise.all([startTestPlatform(), launchBrowser(), tempDir()]);
  org = await tp.createOrg({ name: 'Browser Org' });
  await addPerson(tp, org.id, EMAIL);
});
afterAll(async () => {
  await browser?.close();
  await tp?.close();
  await tmp?.remove();
});

describe('signing in', () => {
  it('refuses a wrong password with the route sentence, then signs in', async () => {
    const page = await browser.page();
    const violations = collectCspViolations(page);
    await signIn(page, tp.url, EMAIL, 'not the password');
    expect(page.url()).toContain('/console/sign-in');
    await expect(page.locator('.refusal').textContent()).resolves.toContain(
      'The email or password is wrong.',
    );
    await screenshot(page, 'sign-in-refused');

    await fillSignIn(page, EMAIL);
    expect(new URL(page.url()).pathname).toBe('/console/apps');
    await expect(page.locator('header .email').textContent()).resolves.toBe(EMAIL);
    await expect(page.locator('header .org').textContent()).resolves.toBe('Browser Org');
    // The key is out of the page's reach.
    expect(await page.evaluate(() => document.cookie)).toBe('');
    await screenshot(page, 'apps-empty');
    expect(violations).toEqual([]);
    await page.close();
  });

  it('sends a signed-out visitor to sign in, then back to the page asked for', async () => {
    await browser.context.clearCookies();
    const page = await browser.page();
    await page.goto(`${tp.url}/console/apps`);
    expect(new URL(page.url()).pathname).toBe('/console/sign-in');
    await fillSignIn(page, EMAIL);
    expect(new URL(page.url()).pathname).toBe('/console/apps');
    await page.close();
  });
});

describe('device login', () => {
  it('approves a login started by `pier login`, and the CLI receives its key', async () => {
    await browser.context.clearCookies();
    const config = path.join(tmp.dir, 'login', 'config.json');
    let stdout = '';
    const done = new Promise<{ code: number | null; stderr: string }>((resolve) => {
      const child = execFile(
        process.execPath,
        [...ENTRY, 'login', '--api-url', tp.url],
        { env: cleanEnv({ PIER_CONFIG: config, PIER_LOGIN_POLL_MS: '500' }), timeout: 28_000 },
        (err, _out, stderr) =>
          resolve({ code: err ? (typeof err.code === 'number' ? err.code : null) : 0, stderr }),
      );
      child.stdin?.end();
      child.stdout?.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    });
    const url = await waitFor(() => /(http\S+\/console\/device\?userCode=\S+)/.exec(stdout)?.[1]);
    const userCode = /code ([A-Z]{4}-[A-Z]{4})\b/.exec(stdout)![1]!;

    // Signed out: the link goes through sign-in and comes back with the code filled in.
    const page = await browser.page();
    await page.goto(url);
    expect(new URL(page.url()).pathname).toBe('/console/sign-in');
    await fillSignIn(page, EMAIL);
    expect(new URL(page.url()).pathname).toBe('/console/device');
    await expect(page.locator('.user-code').textContent()).resolves.toBe(userCode);
    await expect(page.locator('.client').textContent()).resolves.toMatch(/^pier-cli \d/);
    await expect(page.locator('.requested-from').textContent()).resolves.toBe('127.0.0.1');
    await screenshot(page, 'device-approve');

    await page.click('button[value=approve]');
    await expect(page.locator('h1').textContent()).resolves.toBe('Device approved');
    const res = await done;
    expect(res.stderr).toBe('');
    expect(res.code).toBe(0);
    expect(stdout).toContain('Logged in to Browser Org');
    const saved = JSON.parse(await readFile(config, 'utf8')) as { apiKey: string };
    const apps = await tp.request('GET', '/v1/apps', { token: saved.apiKey });
    expect(apps.status).toBe(200);
    await page.close();
  }, 40_000);
});

describe('htmx requests', () => {
  it('carry the CSRF header from the layout, and follow a redirect answer', async () => {
    const page = await browser.page();
    await signIn(page, tp.url, EMAIL);
    await page.waitForFunction(() => 'htmx' in window);
    await Promise.all([
      page.waitForURL('**/console/apps/made-by-htmx'),
      page.evaluate(() => {
        const w = window as unknown as {
          htmx: { ajax(verb: string, path: string, ctx: unknown): Promise<void> };
        };
        return w.htmx.ajax('POST', '/console/apps', { values: { name: 'made-by-htmx' } });
      }),
    ]);
    const app = await tp.request('GET', '/v1/apps/made-by-htmx', { token: org.token });
    expect(app.status).toBe(200);
    await page.close();
  });
});

describe('refused', () => {
  it('a form posted from another site, with the session cookie in the browser', async () => {
    // Signed in on the console's origin...
    const page = await browser.page();
    await signIn(page, tp.url, EMAIL);
    // ...then a page of another site (localhost is another site than 127.0.0.1) posts a
    // form to the console.
    const evil = http.createServer((_req, res) => {
      res.setHeader('content-type', 'text/html');
      res.end(`<form id="f" method="post" action="${tp.url}/console/apps">
        <input name="name" value="made-by-evil"></form>
        <script>document.getElementById('f').submit()</script>`);
    });
    await new Promise<void>((resolve) => evil.listen(0, '127.0.0.1', resolve));
    try {
      const port = (evil.address() as AddressInfo).port;
      const answer = page.waitForResponse((r) => r.url() === `${tp.url}/console/apps`);
      await page.goto(`http://localhost:${port}/`);
      const res = await answer;
      expect(res.status()).toBe(403);
      expect(((await res.json()) as { code: string }).code).toBe('csrf-failed');
    } finally {
      evil.close();
    }
    const app = await tp.request('GET', '/v1/apps/made-by-evil', { token: org.token });
    expect(app.status).toBe(404);
    await page.close();
  });

  it('a same-origin post without the CSRF token (403 csrf-failed)', async () => {
    const page = await browser.page();
    await signIn(page, tp.url, EMAIL);
    const status = await page.evaluate(async () => {
      const res = await fetch('/console/apps', {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: 'name=no-token-here',
      });
      return { status: res.status, body: (await res.json()) as { code: string } };
    });
    expect(status).toEqual({ status: 403, body: expect.objectContaining({ code: 'csrf-failed' }) });
    await page.close();
  });
});

async function waitFor<T>(probe: () => T | undefined, ms = 10_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = probe();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 50));
  }
}
