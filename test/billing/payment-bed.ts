/**
 * A pier that takes payments through the Stripe stand-in (stripe-stand-in.ts), with
 * one-second billing windows and a cent per running second, and helpers to act as a
 * console admin and to spend credit through pier's own recording and booking code.
 */
import { expect } from 'vitest';
import { bookDue } from '../../src/services/billing/booking.js';
import { actOnProjectedBalances } from '../../src/services/billing/projected.js';
import { recordUsage } from '../../src/services/billing/record.js';
import type { ConfigInput } from '../../src/config.js';
import { addPerson, ConsoleVisitor } from '../console/console-client.js';
import { startTestPlatform, type TestOrg, type TestPlatform } from '../helpers/platform.js';
import { startStripeStandIn, type StripeStandIn } from './stripe-stand-in.js';

export const CENT_PER_SECOND = { machine_running_seconds: 1_000_000 };
const WINDOW_MS = 1000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
export const nextWindow = () => sleep(WINDOW_MS - (Date.now() % WINDOW_MS) + 30);

export interface PaymentBed {
  tp: TestPlatform;
  stripe: StripeStandIn;
  close(): Promise<void>;
}

export async function startPaymentBed(config: ConfigInput = {}): Promise<PaymentBed> {
  const stripe = await startStripeStandIn();
  let tp: TestPlatform | undefined;
  try {
    tp = await startTestPlatform({
      billingWindowSeconds: 1,
      stripeSecretKey: stripe.secretKey,
      stripeApiUrl: stripe.url,
      stripeWebhookSecret: stripe.webhookSecret,
      ...config,
    });
    stripe.eventsUrl = `${tp.url}/v1/billing/stripe/events`;
    expect((await tp.admin('PUT', '/admin/v1/prices', { prices: CENT_PER_SECOND })).status).toBe(
      200,
    );
    await nextWindow(); // prices apply from the next window on
  } catch (err) {
    await tp?.close();
    await stripe.close();
    throw err;
  }
  const bed: PaymentBed = {
    tp,
    stripe,
    async close() {
      await bed.tp.close();
      await stripe.close();
    },
  };
  return bed;
}

let people = 0;

/** A person of the organization signed in to the console: their console key. */
export async function consoleKey(tp: TestPlatform, org: TestOrg, role = 'admin'): Promise<string> {
  const email = `payer${++people}-${process.pid}@example.com`;
  await addPerson(tp, org.id, email, role);
  const visitor = new ConsoleVisitor(tp);
  await visitor.signIn(email);
  if (!visitor.key) throw new Error('the console sign-in gave no key');
  return visitor.key;
}

/**
 * Spends `cents` of the organization's credit: running time recorded, its window booked,
 * and the projected balance looked at as the metering tick does (blocks, auto-recharge).
 */
export async function spend(tp: TestPlatform, org: TestOrg, cents: number): Promise<void> {
  if (Date.now() % WINDOW_MS > WINDOW_MS - 200) await nextWindow();
  await recordUsage(tp.platform.ctx.db, [
    { orgId: org.id, kind: 'machine_running_seconds', quantity: String(cents) },
  ]);
  await nextWindow();
  await bookDue(tp.platform.ctx);
  await actOnProjectedBalances(tp.platform.ctx);
}

/** The ledger's entries sum to the balance, to the micro-cent. */
export async function expectLedgerSumsToBalance(tp: TestPlatform, token: string): Promise<void> {
  const ledger = await tp.request('GET', '/v1/billing/ledger?limit=500', { token });
  const credits = await tp.request('GET', '/v1/billing/credits', { token });
  const sum = ledger.body.entries.reduce(
    (n: bigint, e: { amountMicros: string }) => n + BigInt(e.amountMicros),
    0n,
  );
  expect(sum.toString()).toBe(credits.body.balanceMicros);
}
