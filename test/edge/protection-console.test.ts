/**
 * The console's edge page of an app in a real browser: protection set to password mode
 * (the generated password shown once, gone on reload), a signed link, the network
 * policy and a UDP endpoint through their forms; no CSP violation.
 */
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, type TestOrg, type TestPlatform } from '../helpers/platform.js';
import {
  collectCspViolations,
  launchBrowser,
  screenshot,
  signIn,
  type TestBrowser,
} from '../console/browser.js';
import { addPerson } from '../console/console-client.js';

let tp: TestPlatform;
let org: TestOrg;
let browser: TestBrowser;
let page: Page;
let violations: string[];
const EMAIL = 'edge@example.com';

const api = (method: string, path: string, body?: unknown) =>
  tp.request(method, path, { token: org.token, body });

beforeAll(async () => {
  [tp, browser] = await Promise.all([startTestPlatform(), launchBrowser()]);
  org = await tp.createOrg({ name: 'Edge Browser Org' });
  await addPerson(tp, org.id, EMAIL);
  expect((await api('POST', '/v1/apps', { name: 'edge-page' })).status).toBe(201);
  page = await browser.page();
  violations = collectCspViolations(page);
  page.on('dialog', (d) => void d.accept());
  await signIn(page, tp.url, EMAIL);
}, 120_000);
afterAll(async () => {
  await browser?.close();
  await tp?.close();
});

describe('the edge page of an app', () => {
  it('sets protection, a link, the policy and a UDP endpoint', async () => {
    await page.goto(`${tp.url}/console/apps/edge-page`);
    await page.click('a[href$="/edge"]');
    expect(new URL(page.url()).pathname).toBe('/console/apps/edge-page/edge');
    expect(await page.locator('[data-mode]').textContent()).toBe('public');

    await page.selectOption('select[name=mode]', 'password');
    await page.click('form[action$="/edge/protection"] button[type=submit]');
    const password = (await page.locator('.once-value').textContent({ timeout: 10_000 }))!.trim();
    expect(password).toMatch(/^[A-Za-z0-9]{24}$/);
    expect(await page.locator('[data-mode]').textContent()).toBe('password');
    await page.goto(`${tp.url}/console/apps/edge-page/edge`);
    expect(await page.content()).not.toContain(password);

    await page.fill('form[action$="/edge/links"] input[name=label]', 'for a friend');
    await page.click('form[action$="/edge/links"] button[type=submit]');
    const url = await page.locator('[data-link-url]').textContent({ timeout: 10_000 });
    expect(url).toContain('pier_access=l1.');
    expect(await page.locator('li[data-link]').count()).toBe(1);

    await page.fill('input[name=bandwidthMbit]', '10');
    await page.fill('input[name=reason]', 'from the console');
    await page.click('form[action$="/edge/policy"] button[type=submit]');
    await page.waitForURL(/\/edge$/);
    expect((await api('GET', '/v1/apps/edge-page/policy/network')).body).toMatchObject({
      bandwidthMbit: 10,
      newConnectionsPerMinute: null,
      reason: 'from the console',
    });

    await page.fill('input[name=targetPort]', '5353');
    await page.click('form[action$="/edge/udp"] button[type=submit]');
    await page.waitForURL(/\/edge$/);
    expect(await page.locator('li[data-udp]').count()).toBe(1);
    await screenshot(page, 'app-edge');
    await page.click('li[data-udp] button');
    await page.waitForURL(/\/edge$/);
    expect(await page.locator('li[data-udp]').count()).toBe(0);
    expect(violations).toEqual([]);
  }, 120_000);
});
