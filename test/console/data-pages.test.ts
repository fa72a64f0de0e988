/**
 * The console's data pages in a real browser: a token created and revoked (its value
 * shown once, gone on reload), an object uploaded through the browser's presigned PUT
 * and downloaded back, a database created with its URL shown once, a secret set
 * without its value ever in the page, and the billing chart; no CSP violation anywhere.
 * Screenshots go to test-artifacts/console/.
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
} from './browser.js';
import { addPerson } from './console-client.js';

let tp: TestPlatform;
let org: TestOrg;
let browser: TestBrowser;
let page: Page;
let violations: string[];
const EMAIL = 'hedy@example.com';

beforeAll(async () => {
  [tp, browser] = await Promise.all([startTestPlatform(), launchBrowser()]);
  org = await tp.createOrg({ name: 'Data Browser Org' });
  await addPerson(tp, org.id, EMAIL);
  page = await browser.page();
  violations = collectCspViolations(page);
  page.on('dialog', (d) => void d.accept());
  // One sign-in for the file (the sign-in route limits sign-ins per address).
  await signIn(page, tp.url, EMAIL);
});
afterAll(async () => {
  await browser?.close();
  await tp?.close();
});

const api = (method: string, path: string, body?: unknown) =>
  tp.request(method, path, { token: org.token, body });

describe('data pages in a browser', () => {
  it('create a token: its value shown once, gone on reload; then revoke it', async () => {
    await page.goto(`${tp.url}/console/tokens`);
    await page.fill('form.create-token input[name=name]', 'browser-key');
    await page.check('form.create-token input[name=scopeRead]');
    await page.fill('form.create-token input[name=ttlSeconds]', '3600');
    await page.click('form.create-token button[type=submit]');
    const value = (await page.locator('.once-value').textContent({ timeout: 10_000 }))!.trim();
    expect((await tp.request('GET', '/v1/apps', { token: value })).status).toBe(200);
    expect(new URL(page.url()).pathname).toBe('/console/tokens');
    await screenshot(page, 'tokens-created');

    await page.reload();
    expect(await page.content()).not.toContain(value);
    await expect(page.locator('.once-value').count()).resolves.toBe(0);
    const row = page.locator('tr[data-token]', { hasText: 'browser-key' });
    await Promise.all([
      page.waitForURL(/\/console\/tokens$/),
      row.locator('button.danger').click(),
    ]);
    await expect(page.locator('tr[data-token]', { hasText: 'browser-key' }).count()).resolves.toBe(
      0,
    );
    expect((await tp.request('GET', '/v1/apps', { token: value })).status).toBe(401);
  });

  it('upload an object through a presigned PUT from the browser, then download it', async () => {
    expect((await api('POST', '/v1/buckets', { name: 'browser-files' })).status).toBe(201);
    await page.goto(`${tp.url}/console/buckets/browser-files`);
    await page.setInputFiles('form.upload-object input[type=file]', {
      name: 'hello.txt',
      mimeType: 'text/plain',
      buffer: Buffer.from('hello from the browser\n'),
    });
    await page.fill('form.upload-object input[name=key]', 'notes/hello.txt');
    await Promise.all([
      page.waitForEvent('load'),
      page.click('form.upload-object button[type=submit]'),
    ]);
    // The upload went to the folder `notes/`.
    await page.click('tr.folder a');
    await page.locator('tr[data-key="notes/hello.txt"]').waitFor();
    await screenshot(page, 'bucket-objects');
    const stored = await api('GET', '/v1/buckets/browser-files/objects');
    expect(stored.body.objects).toMatchObject([{ key: 'notes/hello.txt', sizeBytes: 23 }]);

    await Promise.all([
      page.waitForURL(/\/s3\/browser-files\/notes\/hello\.txt\?/),
      page.click('tr[data-key="notes/hello.txt"] button[data-action=download]'),
    ]);
    await expect(page.locator('body').textContent()).resolves.toContain('hello from the browser');
  });

  it('create a database and see its URL once', async () => {
    await page.goto(`${tp.url}/console/databases`);
    await page.fill('form.create-database input[name=name]', 'browser-pg');
    await page.fill('form.create-database input[name=memoryMb]', '256');
    await page.click('form.create-database button[type=submit]');
    const url = (await page.locator('.once-value').textContent({ timeout: 90_000 }))!.trim();
    expect(url).toMatch(/^postgresql:\/\/app:/);
    await screenshot(page, 'database-created');
    await page.reload();
    expect(await page.content()).not.toContain(url);
    await page.locator('tr[data-database="browser-pg"]').waitFor();
    await page.click('tr[data-database="browser-pg"] a');
    // The moment pickers carry the browser's offset from UTC.
    const offset = await page.locator('form.restore input.tz-offset').inputValue();
    expect(offset).toBe(String(await page.evaluate(() => new Date().getTimezoneOffset())));
    await screenshot(page, 'database-page');
  }, 120_000);

  it('set a secret without its value ever in the page', async () => {
    const VALUE = 'browser-secret-value-9d1c';
    expect((await api('POST', '/v1/apps', { name: 'browser-app' })).status).toBe(201);
    await page.goto(`${tp.url}/console/secrets/browser-app`);
    await page.fill('form.set-secret input[name=name]', 'STRIPE_KEY');
    await page.fill('form.set-secret input[name=value]', VALUE);
    await Promise.all([
      page.waitForEvent('load'),
      page.click('form.set-secret button[type=submit]'),
    ]);
    await page.locator('tr[data-secret="STRIPE_KEY"]').waitFor();
    expect(page.url()).not.toContain(VALUE);
    expect(await page.content()).not.toContain(VALUE);
    await expect(page.locator('form.set-secret input[name=value]').inputValue()).resolves.toBe('');
    await screenshot(page, 'secrets');
  });

  it('draw billing usage as SVG, and no page broke the CSP', async () => {
    await tp.platform.ctx.db
      .insertInto('usage_events')
      .values(
        [1, 5, 9, 20].map((h) => ({
          org_id: org.id,
          kind: 'machine_running_seconds',
          quantity: String(600 * h),
          at: new Date(Date.now() - h * 3600_000),
        })),
      )
      .execute();
    await page.goto(`${tp.url}/console/billing?period=24h`);
    // 24 hourly bars per chart; the metering tick may have added charts for this file's
    // earlier storage, so the machine chart is the one counted.
    await expect(
      page.locator('figure.usage-chart[data-kind="machine_running_seconds"] svg rect').count(),
    ).resolves.toBe(24);
    await screenshot(page, 'billing');
    await page.goto(`${tp.url}/console/audit`);
    await screenshot(page, 'audit');
    expect(violations).toEqual([]);
  });
});
