/**
 * Payments through the real `stripe` SDK and the Stripe stand-in (docs/billing.md): a
 * checkout top-up credits once per paid session whatever is replayed, forged events are
 * refused, the console-only routes refuse every other key, another organization's top-up
 * answers like a missing one, and auto-recharge fires when the projected balance (the
 * number that blocks) is below the threshold, before the block, keeps to its cap, shows a
 * declined card, and survives a restart in the middle of a charge.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../databases/helpers.js';
import { actOnProjectedBalances } from '../../src/services/billing/projected.js';
import { recordUsage } from '../../src/services/billing/record.js';
import { restartTestPlatform, type TestOrg } from '../helpers/platform.js';
import {
  consoleKey,
  expectLedgerSumsToBalance,
  spend,
  startPaymentBed,
  type PaymentBed,
} from './payment-bed.js';

let bed: PaymentBed;
let org: TestOrg;
let admin: string;

const as = (token: string, method: string, p: string, body?: unknown) =>
  bed.tp.request(method, p, { token, body });
const credits = async (token = admin) => (await as(token, 'GET', '/v1/billing/credits')).body;

beforeAll(async () => {
  bed = await startPaymentBed({ jobLeaseMs: 1000 });
  org = await bed.tp.createOrg({ grantCents: 100 });
  admin = await consoleKey(bed.tp, org);
}, 60_000);
afterAll(async () => bed?.close());

/** A paid top-up of `cents`: through the route and the stand-in's payment page. */
async function topUp(token: string, cents: number) {
  const res = await as(token, 'POST', '/v1/billing/topups', { amountCents: cents });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  await bed.stripe.pay(res.body.sessionId);
  return res.body;
}

describe('who may change billing', () => {
  it('refuses plain, member, read-only and agent keys on every console-only route', async () => {
    const member = await consoleKey(bed.tp, org, 'member');
    const reader = (await as(org.token, 'POST', '/v1/tokens', { name: 'reader', scopes: ['read'] }))
      .body.token;
    const agent = (
      await as(org.token, 'POST', '/v1/tokens', { name: 'agent', agent: { class: 'sandbox' } })
    ).body.token;
    const routes: [string, string, unknown][] = [
      ['POST', '/v1/billing/topups', { amountCents: 1000 }],
      ['PUT', '/v1/billing/auto-recharge', { enabled: false }],
      ['POST', '/v1/billing/portal', undefined],
    ];
    for (const [method, p, body] of routes) {
      for (const token of [org.token, member]) {
        const res = await as(token, method, p, body);
        expect([p, res.status, res.body.code]).toEqual([p, 403, 'billing-console-only']);
      }
      expect((await as(reader, method, p, body)).body.code).toBe('token-scope');
      const asAgent = await as(agent, method, p, body);
      expect(asAgent.status).toBe(403);
      expect(asAgent.body.code).toMatch(/^(agent-token-|billing-console-only$)/);
    }
    expect(bed.stripe.sessions.size).toBe(0);
  });

  it('validates the top-up body, all problems at once, and the smallest top-up', async () => {
    const bad = await as(admin, 'POST', '/v1/billing/topups', { amountCents: 10.5, extra: 1 });
    expect(bad.status).toBe(400);
    expect(bad.body.code).toBe('bad-request');
    expect(bad.body.issues.length).toBeGreaterThanOrEqual(2);
    const { minTopupCents } = await credits();
    if (minTopupCents > 1) {
      const small = await as(admin, 'POST', '/v1/billing/topups', {
        amountCents: minTopupCents - 1,
      });
      expect([small.status, small.body.issues[0].path]).toEqual([400, 'amountCents']);
    }
  });

  it('answers 409 not-prepaid and no-customer where the spec says', async () => {
    const postpaid = await bed.tp.createOrg({ prepaid: false });
    const key = await consoleKey(bed.tp, postpaid);
    const topup = await as(key, 'POST', '/v1/billing/topups', { amountCents: 1000 });
    expect([topup.status, topup.body.code]).toEqual([409, 'not-prepaid']);
    const rule = await as(key, 'PUT', '/v1/billing/auto-recharge', { enabled: false });
    expect([rule.status, rule.body.code]).toEqual([409, 'not-prepaid']);
    const portal = await as(key, 'POST', '/v1/billing/portal');
    expect([portal.status, portal.body.code]).toEqual([409, 'no-customer']);
  });
});

describe('a checkout top-up', () => {
  let topupId: string;
  let paidEvent: string;

  it('answers the checkout and records a pending top-up', async () => {
    const res = await as(admin, 'POST', '/v1/billing/topups', { amountCents: 2500 });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    expect(res.body).toEqual({
      topupId: expect.stringMatching(/^top/),
      amountCents: 2500,
      checkoutUrl: expect.stringContaining(`${bed.stripe.url}/pay/`),
      sessionId: expect.stringMatching(/^cs_test_/),
    });
    topupId = res.body.topupId;
    const session = bed.stripe.sessions.get(res.body.sessionId)!;
    expect(session).toMatchObject({
      mode: 'payment',
      amount_total: 2500,
      currency: 'eur',
      metadata: { orgId: org.id, topupId },
      payment_intent_data: { setup_future_usage: 'off_session' },
      success_url: `${bed.tp.url}/console/billing?topup=${topupId}`,
    });
    const t = await as(admin, 'GET', `/v1/billing/topups/${topupId}`);
    expect(t.body).toMatchObject({ state: 'pending', amountCents: 2500, origin: 'checkout' });
  });

  it('credits the account once when the signed event arrives, and saves the card', async () => {
    const before = BigInt((await credits()).balanceMicros);
    const session = [...bed.stripe.sessions.values()].find((s) => s.metadata.topupId === topupId)!;
    await bed.stripe.pay(session.id);
    const event = bed.stripe.events.at(-1)!;
    expect([event.type, event.status]).toEqual(['checkout.session.completed', 200]);
    paidEvent = event.id;
    const after = await credits();
    expect(BigInt(after.balanceMicros) - before).toBe(2500n * 1_000_000n);
    expect(after.autoRecharge.hasPaymentMethod).toBe(true);
    expect((await as(admin, 'GET', `/v1/billing/topups/${topupId}`)).body.state).toBe('paid');
    const ledger = await as(admin, 'GET', '/v1/billing/ledger');
    expect(ledger.body.entries[0]).toMatchObject({
      kind: 'topup',
      reference: topupId,
      amountCents: 2500,
    });
    await expectLedgerSumsToBalance(bed.tp, admin);
  });

  it('credits nothing more for a replayed event', async () => {
    const before = (await credits()).balanceMicros;
    expect(await bed.stripe.resend(paidEvent)).toBe(200);
    expect(await bed.stripe.resend(paidEvent)).toBe(200);
    expect((await credits()).balanceMicros).toBe(before);
  });

  it('refuses forged, tampered and stale events with 400 bad-signature', async () => {
    const before = (await credits()).balanceMicros;
    const original = bed.stripe.events.find((e) => e.id === paidEvent)!;
    const forged = original.payload.replace(paidEvent, 'evt_forged');
    const attempts: [string, string | undefined][] = [
      [forged, bed.stripe.sign(forged, 'whsec_not_the_secret')],
      [forged, undefined],
      [forged, bed.stripe.sign(original.payload)], // the signature of other bytes
      [forged, bed.stripe.sign(forged, undefined, Math.floor(Date.now() / 1000) - 3600)],
    ];
    for (const [payload, sig] of attempts) {
      const res = await bed.tp.request('POST', '/v1/billing/stripe/events', {
        raw: payload,
        headers: sig ? { 'stripe-signature': sig } : {},
      });
      expect([res.status, res.body.code]).toEqual([400, 'bad-signature']);
    }
    expect((await credits()).balanceMicros).toBe(before);
  });

  it('acknowledges and ignores event types it does not act on', async () => {
    const payload = JSON.stringify({
      id: 'evt_other',
      object: 'event',
      type: 'customer.created',
      data: { object: {} },
    });
    expect(await bed.stripe.post(payload, bed.stripe.sign(payload))).toBe(200);
  });

  it('answers another organization’s top-up like a missing one', async () => {
    const other = await bed.tp.createOrg({ grantCents: 100 });
    const res = await as(other.token, 'GET', `/v1/billing/topups/${topupId}`);
    const missing = await as(other.token, 'GET', '/v1/billing/topups/top_missing');
    expect([res.status, res.body.code]).toEqual([404, 'not-found']);
    expect(res.body).toEqual(missing.body);
  });

  it('answers 502 upstream-failed when the provider refuses the checkout', async () => {
    bed.stripe.refuseCheckouts = true;
    try {
      const res = await as(admin, 'POST', '/v1/billing/topups', { amountCents: 1000 });
      expect([res.status, res.body.code]).toEqual([502, 'upstream-failed']);
      expect(res.body.error).toContain('Checkout is not enabled');
    } finally {
      bed.stripe.refuseCheckouts = false;
    }
  });

  it('makes one customer per organization and opens its portal', async () => {
    await topUp(admin, 1000);
    expect(bed.stripe.customers.size).toBe(1);
    const portal = await as(admin, 'POST', '/v1/billing/portal');
    expect(portal.status).toBe(200);
    expect(portal.body.url).toMatch(`${bed.stripe.url}/portal/`);
    const ps = [...bed.stripe.portals.values()][0]!;
    expect(ps.return_url).toBe(`${bed.tp.url}/console/billing`);
  });
});

describe('auto-recharge', () => {
  it('validates the rule, all problems at once', async () => {
    const bad = await as(admin, 'PUT', '/v1/billing/auto-recharge', {
      thresholdCents: -1,
      amountCents: 'x',
    });
    expect(bad.status).toBe(400);
    expect(bad.body.issues.map((i: { path: string }) => i.path).sort()).toEqual([
      'amountCents',
      'enabled',
      'thresholdCents',
    ]);
    const zero = await as(admin, 'PUT', '/v1/billing/auto-recharge', { enabled: true });
    expect([zero.status, zero.body.issues[0].path]).toEqual([400, 'amountCents']);
  });

  it('fires below the threshold and never charges more than the cap', async () => {
    const balance = (await credits()).balanceCents;
    const rule = { enabled: true, thresholdCents: balance - 100, amountCents: 500, capCents: 1200 };
    const set = await as(admin, 'PUT', '/v1/billing/auto-recharge', rule);
    expect(set.status, JSON.stringify(set.body)).toBe(200);
    expect(set.body.autoRecharge).toMatchObject({ ...rule, pending: false, failedAt: null });

    const charges = () => [...bed.stripe.intents.values()].filter((pi) => pi.off_session);
    // Each spend takes the balance below the threshold again: two charges fit the cap.
    for (let n = 1; n <= 3; n++) {
      await spend(bed.tp, org, 600);
      const expected = Math.min(n, 2);
      await waitFor(
        async () => charges().length === expected && !(await credits()).autoRecharge.pending,
        `charge ${expected}`,
        15_000,
      );
    }
    expect(charges().map((c) => c.amount)).toEqual([500, 500]);
    const ledger = (await as(admin, 'GET', '/v1/billing/ledger?limit=500')).body.entries;
    const recharges = ledger.filter((e: { detail: string }) => e.detail === 'auto-recharge');
    // Credited once each, though both the job and the provider's event reported them.
    expect(recharges.map((e: { amountCents: number }) => e.amountCents)).toEqual([500, 500]);
    await expectLedgerSumsToBalance(bed.tp, admin);
  }, 30_000);

  it('shows a declined card as failedAt and tries again only once the rule is set anew', async () => {
    const balance = (await credits()).balanceCents;
    const rule = {
      enabled: true,
      thresholdCents: balance + 1000,
      amountCents: 500,
      capCents: 10_000,
    };
    await as(admin, 'PUT', '/v1/billing/auto-recharge', rule);
    bed.stripe.declineCharges = true;
    try {
      await spend(bed.tp, org, 1);
      const failed = await waitFor(
        async () => (await credits()).autoRecharge.failedAt,
        'the failure',
        15_000,
      );
      expect(failed).toMatch(/^\d{4}-/);
      expect((await credits()).autoRecharge.pending).toBe(false);
    } finally {
      bed.stripe.declineCharges = false;
    }
    const before = (await credits()).balanceMicros;
    await spend(bed.tp, org, 1); // no new try while failed
    expect(BigInt((await credits()).balanceMicros)).toBe(BigInt(before) - 1_000_000n);
    expect(
      (await as(admin, 'PUT', '/v1/billing/auto-recharge', rule)).body.autoRecharge.failedAt,
    ).toBeNull();
    await spend(bed.tp, org, 1);
    await waitFor(
      async () => BigInt((await credits()).balanceMicros) > BigInt(before),
      'the charge after the new rule',
      15_000,
    );
    await expectLedgerSumsToBalance(bed.tp, admin);
  }, 30_000);

  it('charges once across a restart in the middle of the charge', async () => {
    const balance = (await credits()).balanceCents;
    await as(admin, 'PUT', '/v1/billing/auto-recharge', {
      enabled: true,
      thresholdCents: balance + 1000,
      amountCents: 500,
      capCents: 100_000,
    });
    const before = bed.stripe.intents.size;
    const ledgerBefore = (await as(admin, 'GET', '/v1/billing/ledger?limit=500')).body.entries;
    const requests = bed.stripe.chargeRequests;
    // The stand-in holds the charge; pier stops before it hears the answer.
    const release = bed.stripe.holdCharges();
    await spend(bed.tp, org, 1);
    await waitFor(async () => bed.stripe.heldCharges() > 0, 'the charge to start', 10_000);
    // Its worker waits out its grace, hands the job back and goes; the new one retries.
    bed.tp = await restartTestPlatform(bed.tp, {
      billingWindowSeconds: 1,
      jobLeaseMs: 1000,
      stripeSecretKey: bed.stripe.secretKey,
      stripeApiUrl: bed.stripe.url,
      stripeWebhookSecret: bed.stripe.webhookSecret,
    });
    bed.stripe.eventsUrl = `${bed.tp.url}/v1/billing/stripe/events`;
    await waitFor(
      async () => bed.stripe.chargeRequests - requests >= 2,
      'the retried charge',
      10_000,
    );
    release();
    await waitFor(
      async () => !(await credits()).autoRecharge.pending,
      'the recharge to settle after the restart',
      20_000,
    );
    const recharges = (await as(admin, 'GET', '/v1/billing/ledger?limit=500')).body.entries.filter(
      (e: { detail: string; amountCents: number }) => e.detail === 'auto-recharge',
    );
    const rechargesBefore = ledgerBefore.filter(
      (e: { detail: string }) => e.detail === 'auto-recharge',
    );
    expect(recharges.length - rechargesBefore.length).toBe(1);
    expect(bed.stripe.intents.size - before).toBe(1);
    await expectLedgerSumsToBalance(bed.tp, admin);
  }, 60_000);
});

describe('auto-recharge on the projected balance (the default window, an hour)', () => {
  it('tops up on usage recorded and not booked, before the block, once across replicas', async () => {
    bed.tp = await restartTestPlatform(bed.tp, {
      jobLeaseMs: 1000,
      stripeSecretKey: bed.stripe.secretKey,
      stripeApiUrl: bed.stripe.url,
      stripeWebhookSecret: bed.stripe.webhookSecret,
    });
    bed.stripe.eventsUrl = `${bed.tp.url}/v1/billing/stripe/events`;
    const ctx = bed.tp.platform.ctx;
    expect(ctx.config.billingWindowSeconds).toBe(3600);
    // The first organization's rule rests: this one alone may recharge here.
    await as(admin, 'PUT', '/v1/billing/auto-recharge', { enabled: false });
    const payer = await bed.tp.createOrg();
    const key = await consoleKey(bed.tp, payer);
    await topUp(key, 500); // the smallest top-up, and the card saved
    await waitFor(async () => (await credits(key)).balanceCents === 500, 'the top-up', 15_000);
    const rule = { enabled: true, thresholdCents: 300, amountCents: 500, capCents: 500 };
    expect((await as(key, 'PUT', '/v1/billing/auto-recharge', rule)).status).toBe(200);
    const run = (cents: number) =>
      recordUsage(ctx.db, [
        { orgId: payer.id, kind: 'machine_running_seconds', quantity: String(cents) },
      ]);
    const charges = () =>
      [...bed.stripe.intents.values()].filter(
        (pi) => pi.off_session && pi.metadata?.orgId === payer.id,
      );

    // 250 cents recorded, nothing booked (the window is open): booked 500, projected 250,
    // below the threshold of 300. Two ticks at once (as on two replicas) start one recharge.
    await run(250);
    const acted = await Promise.all([actOnProjectedBalances(ctx), actOnProjectedBalances(ctx)]);
    expect(acted.flatMap((a) => a.recharges)).toHaveLength(1);
    expect(acted.flatMap((a) => a.blocked)).toEqual([]);
    await waitFor(
      async () => (await credits(key)).balanceCents === 1000,
      'the recharge to be credited',
      15_000,
    );
    expect(charges().map((c) => c.amount)).toEqual([500]);

    // 600 cents more: without the recharge the projection (500 − 850) would block; with
    // it, 1000 − 850 = 150 cents, open (and below the threshold, but the cap is reached).
    await run(600);
    expect(await actOnProjectedBalances(ctx)).toEqual({ blocked: [], recharges: [] });
    const account = await credits(key);
    expect(account).toMatchObject({ blocked: false, balanceCents: 1000 });
    expect(account.autoRecharge).toMatchObject({ pending: false, failedAt: null });
    const ledger = (await as(key, 'GET', '/v1/billing/ledger?limit=500')).body.entries;
    expect(ledger.map((e: { kind: string; detail: string }) => `${e.kind} ${e.detail}`)).toEqual([
      'topup auto-recharge',
      'topup top-up (checkout)',
    ]);
    await expectLedgerSumsToBalance(bed.tp, key);
  }, 60_000);
});

describe('an installation without a payment provider', () => {
  it('says so: top-ups answer 503 payments-unavailable, operators grant credit', async () => {
    // The same installation restarted without its PIER_STRIPE_* settings.
    bed.tp = await restartTestPlatform(bed.tp, { billingWindowSeconds: 1 });
    const res = await as(admin, 'POST', '/v1/billing/topups', { amountCents: 1000 });
    expect([res.status, res.body.code]).toEqual([503, 'payments-unavailable']);
    expect(res.body.error).toMatch(/PIER_STRIPE_SECRET_KEY/);
    const portal = await as(admin, 'POST', '/v1/billing/portal');
    expect([portal.status, portal.body.code]).toEqual([503, 'payments-unavailable']);
    const grant = await bed.tp.admin('POST', `/admin/v1/orgs/${org.id}/grants`, {
      amountCents: 500,
    });
    expect(grant.status).toBe(201);
  }, 30_000);
});
