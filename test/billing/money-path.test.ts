/**
 * The whole money path with real parts: a priced running machine drives a small balance
 * to zero, booking blocks the account and the machine is stopped; writes answer 402
 * while reads and stops pass; an admin tops up in a real browser through the console and
 * the Stripe stand-in's payment page (the real `stripe` SDK, a signed event), which
 * unblocks the account; the ledger sums to the balance to the micro-cent. A member sees
 * why they have no billing forms.
 */
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { busyboxLayer, pushImage } from '../../src/runtime/images/build.test-helper.js';
import {
  collectCspViolations,
  launchBrowser,
  screenshot,
  signIn,
  submitAndLoad,
  type TestBrowser,
} from '../console/browser.js';
import { addPerson, ConsoleVisitor } from '../console/console-client.js';
import { waitFor } from '../databases/helpers.js';
import type { TestOrg } from '../helpers/platform.js';
import { startRegistry, type TestRegistry } from '../helpers/registry.js';
import { canRunMachines, freeMachineCidr, removeMachinesNetwork } from '../machines/bed.js';
import { expectLedgerSumsToBalance, startPaymentBed, type PaymentBed } from './payment-bed.js';

let registry: TestRegistry;
let bed: PaymentBed;
let browser: TestBrowser;
let page: Page;
let violations: string[];
let org: TestOrg;
let image: string;
const net = { bridge: `pm${process.pid % 100000}`, cidr: '' };
const ADMIN = `money-admin-${process.pid}@example.com`;
const MEMBER = `money-member-${process.pid}@example.com`;

const req = (method: string, p: string, body?: unknown) =>
  bed.tp.request(method, p, { token: org.token, body });

beforeAll(async () => {
  if (!canRunMachines) return;
  net.cidr = await freeMachineCidr(231);
  registry = await startRegistry();
  await pushImage(registry.url, 'idle:1', {
    layers: [busyboxLayer()],
    config: { Cmd: ['/bin/sleep', '3600'] },
  });
  image = `${registry.host}/idle:1`;
  [bed, browser] = await Promise.all([
    startPaymentBed({
      machinesBridge: net.bridge,
      machinesCidr: net.cidr,
      trustedRegistries: [registry.host],
      meteringIntervalMs: 200,
    }),
    launchBrowser(),
  ]);
  org = await bed.tp.createOrg({ grantCents: 2 });
  await addPerson(bed.tp, org.id, ADMIN);
  await addPerson(bed.tp, org.id, MEMBER, 'member');
  expect((await req('POST', '/v1/apps', { name: 'meter' })).status).toBe(201);
  page = await browser.page();
  violations = collectCspViolations(page);
}, 120_000);

afterAll(async () => {
  if (!canRunMachines) return;
  await browser?.close();
  if (bed) {
    // Open the account whatever happened, so that cleaning up (a write) passes.
    await bed.tp.admin('POST', `/admin/v1/orgs/${org.id}/grants`, { amountCents: 1_000_000 });
    for (const m of (await req('GET', '/v1/apps/meter/machines')).body ?? []) {
      await req('POST', `/v1/machines/${m.id}/destroy`);
    }
    await bed.close();
  }
  await registry?.stop();
  await removeMachinesNetwork(net.bridge, net.cidr);
});

describe.skipIf(!canRunMachines)('the money path', () => {
  let id: string;

  it('a priced running machine spends the balance to zero: blocked, stopped', async () => {
    const created = await req('POST', '/v1/apps/meter/machines', { image, readiness: 'boot' });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    id = created.body.id;
    await waitFor(
      async () => (await req('GET', '/v1/billing/credits')).body.blocked === true,
      'the account to block',
      20_000,
    );
    await waitFor(
      async () => (await req('GET', `/v1/machines/${id}`)).body.observedState === 'stopped',
      'the machine to stop',
      20_000,
    );
  }, 60_000);

  it('answers writes 402 credit-blocked while reads and stops pass', async () => {
    const write = await req('POST', '/v1/apps', { name: 'another' });
    expect([write.status, write.body.code]).toEqual([402, 'credit-blocked']);
    expect((await req('POST', `/v1/machines/${id}/start`)).status).toBe(402);
    expect((await req('GET', `/v1/machines/${id}`)).status).toBe(200);
    expect((await req('GET', '/v1/billing/ledger')).status).toBe(200);
    expect((await req('POST', `/v1/machines/${id}/stop`)).status).toBe(200);
  });

  it('shows a member why there are no billing forms', async () => {
    const member = new ConsoleVisitor(bed.tp);
    await member.signIn(MEMBER);
    const billing = await member.get('/console/billing');
    expect(billing.text).toContain('why-not');
    expect(billing.text).not.toContain('action="/console/billing/topup"');
  });

  it('an admin tops up in the browser; the signed event unblocks the account', async () => {
    await signIn(page, bed.tp.url, ADMIN);
    await page.goto(`${bed.tp.url}/console/billing`);
    await expect(page.locator('.balance .bad').textContent()).resolves.toContain('blocked');
    await page.fill('form.topup input[name=amount]', '20');
    await submitAndLoad(page, 'form.topup button[type=submit]');
    await screenshot(page, 'billing-topup-continue');
    const checkout = await page.locator('a#checkout').getAttribute('href');
    expect(checkout).toContain(`${bed.stripe.url}/pay/`);
    await Promise.all([page.waitForURL(`${bed.stripe.url}/pay/**`), page.click('a#checkout')]);
    // On the provider's page: pay, and come back to the console.
    await Promise.all([page.waitForURL(/\/console\/billing\?topup=/), page.click('#pay')]);
    await expect(page.locator('.topup-state').getAttribute('data-state')).resolves.toBe('paid');
    await expect(page.locator('.balance-amount').textContent()).resolves.toMatch(
      /€19\.\d\d|€20\.00/,
    );
    await screenshot(page, 'billing-topup-returned');

    const credits = (await req('GET', '/v1/billing/credits')).body;
    expect(credits).toMatchObject({ blocked: false, blockedAt: null });
    expect(credits.autoRecharge.hasPaymentMethod).toBe(true);
    expect(bed.stripe.events.map((e) => [e.type, e.status])).toEqual([
      ['checkout.session.completed', 200],
    ]);
    await expectLedgerSumsToBalance(bed.tp, org.token);
    // Unblocked: writes pass again (the machine stayed stopped; it is started by hand).
    const start = await req('POST', `/v1/machines/${id}/start`);
    expect(start.status, JSON.stringify(start.body)).toBe(200);
    expect((await req('POST', `/v1/machines/${id}/stop`)).status).toBe(200);
    expect(violations).toEqual([]);
  }, 60_000);
});
