/**
 * The console's custom domains and zones pages in a real browser: add a domain and see
 * the records to set and its pending status with the reason (read from a DNS server on
 * loopback that holds none of them), a wildcard refused in place, redirect, check, delete;
 * claim a zone, its records and reason, check, release, and `zones-unavailable` shown
 * above the claim form; no CSP violation. No ACME CA: statuses stay `pending_dns`.
 */
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, type TestOrg, type TestPlatform } from '../helpers/platform.js';
import {
  collectCspViolations,
  launchBrowser,
  screenshot,
  signIn,
  submitAndLoad,
  type TestBrowser,
} from '../console/browser.js';
import { addPerson } from '../console/console-client.js';
import { freePort, startDnsServer, type DnsServer } from './acme-servers.js';

let dns: DnsServer;
let tp: TestPlatform;
let org: TestOrg;
let browser: TestBrowser;
let page: Page;
let violations: string[];
const EMAIL = 'domains@example.com';

const api = (method: string, path: string, body?: unknown) =>
  tp.request(method, path, { token: org.token, body });

beforeAll(async () => {
  dns = await startDnsServer();
  [tp, browser] = await Promise.all([
    startTestPlatform({
      dnsListen: `127.0.0.1:${await freePort()}`,
      dnsResolver: dns.address,
      edgeAddress: 'edge.pier.test',
    }),
    launchBrowser(),
  ]);
  org = await tp.createOrg({ name: 'Domains Browser Org' });
  await addPerson(tp, org.id, EMAIL);
  expect((await api('POST', '/v1/apps', { name: 'doms-page' })).status).toBe(201);
  page = await browser.page();
  violations = collectCspViolations(page);
  page.on('dialog', (d) => void d.accept());
  await signIn(page, tp.url, EMAIL);
}, 120_000);
afterAll(async () => {
  await browser?.close();
  await tp?.close();
  await dns?.close();
});

/** Waits for the route to record a failed check, then reloads `url`. */
async function reloadOnceChecked(route: string, url: string): Promise<void> {
  for (let i = 0; i < 150; i++) {
    const body = (await api('GET', route)).body as { error?: string } | { error?: string }[];
    if ((Array.isArray(body) ? body : [body]).every((x) => x.error)) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  await page.goto(url);
}

const text = async (selector: string) => (await page.locator(selector).textContent())?.trim();

describe('the custom domains page', () => {
  it('adds a domain, shows its records and why it is pending, redirects, deletes', async () => {
    await page.goto(`${tp.url}/console/apps/doms-page/edge`);
    expect(await page.locator('a[href$="/doms-page/domains"]').count()).toBe(1);
    await page.goto(`${tp.url}/console/apps/doms-page`);
    await page.click('a[href$="/domains"]');
    const url = `${tp.url}/console/apps/doms-page/domains`;
    expect(page.url()).toBe(url);
    expect(await page.getByText('No custom domains.').count()).toBe(1);

    for (const d of ['www.page.test', 'old.page.test']) {
      await page.fill('input[name=domain]', d);
      await submitAndLoad(page, 'form.add-domain button[type=submit]');
    }
    const row = '[data-domain="www.page.test"]';
    expect(await text(`${row} [data-status]`)).toBe('pending_dns');
    expect(await text(`${row} tr[data-record=proof]`)).toMatch(
      /^proof\s+TXT\s+_pier-challenge\.www\.page\.test\s+\S+$/,
    );
    expect(await text(`${row} tr[data-record=point]`)).toMatch(
      /^point\s+CNAME\s+www\.page\.test\s+edge\.pier\.test$/,
    );

    await reloadOnceChecked('/v1/apps/doms-page/domains', url);
    expect(await text(`${row} [data-error]`)).toMatch(
      /^The TXT record _pier-challenge\.www\.page\.test does not hold \S+\.$/,
    );
    await screenshot(page, 'domains');

    // A wildcard is refused above the form, the list still there.
    await page.fill('input[name=domain]', '*.page.test');
    await submitAndLoad(page, 'form.add-domain button[type=submit]');
    expect(await text('.refusal .code')).toBe('400 bad-request');
    expect(await page.locator('[data-domain]').count()).toBe(2);

    const old = '[data-domain="old.page.test"]';
    await page.selectOption(`${old} select[name=to]`, 'www.page.test');
    await submitAndLoad(page, `${old} form[action$="/redirect"] button`);
    const list = (await api('GET', '/v1/apps/doms-page/domains')).body as { redirectTo: string }[];
    expect(list.map((d) => d.redirectTo)).toEqual(['www.page.test', null]);
    expect(await page.locator(`${old} option[selected]`).getAttribute('value')).toBe(
      'www.page.test',
    );

    await submitAndLoad(page, `${row} form[action$="/check"] button`);
    expect(await text('p.notice')).toBe('A check of www.page.test is queued.');

    await submitAndLoad(page, `${old} form[action$="/delete"] button`);
    expect(await page.locator('[data-domain]').count()).toBe(1);
    expect(await page.locator('aside.equivalent').textContent()).toContain(
      'pier domains add doms-page <domain>',
    );
    expect(violations).toEqual([]);
  }, 120_000);
});

describe('the zones page', () => {
  it('claims a zone, shows its records and status, checks, releases', async () => {
    await page.goto(`${tp.url}/console/apps`);
    await page.click('nav a[href="/console/zones"]');
    const url = `${tp.url}/console/zones`;
    await page.fill('input[name=zone]', 'page-zone.test');
    await submitAndLoad(page, 'form.claim-zone button[type=submit]');
    const row = '[data-zone="page-zone.test"]';
    expect(await text(`${row} tr[data-record=acme]`)).toMatch(
      /^acme\s+CNAME\s+_acme-challenge\.page-zone\.test\s+[a-z0-9]+\.acme\.edge\.pier\.test$/,
    );
    expect(await text(`${row} tr[data-record=point]`)).toMatch(
      /^point\s+CNAME\s+\*\.page-zone\.test\s+edge\.pier\.test$/,
    );

    await reloadOnceChecked('/v1/domains/zones/page-zone.test', url);
    expect(await text(`${row} [data-status]`)).toBe('pending_dns');
    expect(await text(`${row} [data-error]`)).toMatch(
      /^_acme-challenge\.page-zone\.test is not a CNAME/,
    );
    expect(Number(await text(`${row} [data-attempts]`))).toBeGreaterThanOrEqual(1);
    expect(await page.locator(`${row} time`).count()).toBe(2); // last checked, claimed
    await screenshot(page, 'zones');

    await submitAndLoad(page, `${row} form[action$="/check"] button`);
    expect(await text('p.notice')).toBe('A check of page-zone.test is queued.');
    await submitAndLoad(page, `${row} form[action$="/release"] button`);
    expect(await page.locator('[data-zone]').count()).toBe(0);
    expect(violations).toEqual([]);
  }, 120_000);

  it('shows zones-unavailable above the claim form without the edge DNS', async () => {
    const saved = tp.platform.config.dnsListen;
    tp.platform.config.dnsListen = undefined;
    try {
      await page.goto(`${tp.url}/console/zones`);
      await page.fill('input[name=zone]', 'nodns.test');
      await submitAndLoad(page, 'form.claim-zone button[type=submit]');
      expect(await text('.refusal strong')).toContain('PIER_DNS_LISTEN');
      expect(await text('.refusal .code')).toBe('503 zones-unavailable');
      expect(await page.locator('form.claim-zone').count()).toBe(1);
    } finally {
      tp.platform.config.dnsListen = saved;
    }
  }, 60_000);
});
