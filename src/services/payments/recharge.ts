/**
 * Auto-recharge (spec 2.9, 4.7): when the projected balance (the booked balance minus the
 * usage recorded and not booked yet: the number that blocks) is below the rule's
 * threshold, `amountCents` is charged off session on the card the first checkout saved.
 *
 * The trigger runs at each metering tick, in the transaction that blocks at the projected
 * zero (billing/projected.ts), before the block: it reserves the amount against the cap
 * (`recharged_cents`, charged or in flight over the whole schedule, never above
 * `capCents`), marks the rule `pending`, records a pending top-up and enqueues the charge,
 * all or nothing. The charge is a durable job (it survives a restart): the provider call
 * is idempotent on the top-up id, so a retry after a crash never charges twice. Paid, the
 * top-up is credited through settle.ts like any other; refused, it is `failed`, the rule
 * shows `failedAt`, the reservation is given back, and nothing is tried again until the
 * rule is set anew (a declined card is not charged on every tick).
 */
import { sql } from 'kysely';
import { z } from 'zod';
import type { AutoRechargeBody, CreditAccount } from '../../contracts/billing.js';
import { newId } from '../../crypto/tokens.js';
import { badRequest } from '../../errors/api-error.js';
import { defineJob, exponentialBackoff, type JobCatalogue } from '../../jobs/catalogue.js';
import { enqueue } from '../../jobs/queue.js';
import type { Tx } from '../../store/db.js';
import type { ServiceContext } from '../context.js';
import { getCreditAccount } from '../billing.js';
import { paymentProviderOf } from './index.js';
import type { ChargeOutcome } from './provider.js';
import { failTopup, settleTopup } from './settle.js';
import { windowMsOf } from '../billing/pricing.js';

export const RECHARGE_JOB = 'billing.auto-recharge';
const RECHARGE_ATTEMPTS = 8;

export async function setAutoRecharge(
  ctx: ServiceContext,
  orgId: string,
  rule: AutoRechargeBody,
): Promise<CreditAccount> {
  const account = await getCreditAccount(ctx.db, orgId);
  if (rule.enabled && rule.amountCents < Math.max(1, account.minTopupCents)) {
    throw badRequest([
      {
        path: 'amountCents',
        message: `must be at least ${Math.max(1, account.minTopupCents)} (minTopupCents) when enabled`,
      },
    ]);
  }
  const set = {
    recharge_enabled: rule.enabled,
    threshold_cents: rule.thresholdCents,
    amount_cents: rule.amountCents,
    cap_cents: rule.capCents,
    // A rule set anew is tried again after a failure.
    recharge_failed_at: null,
  };
  await ctx.db
    .insertInto('payment_accounts')
    .values({ org_id: orgId, customer_id: null, payment_method_id: null, ...set })
    .onConflict((oc) => oc.column('org_id').doUpdateSet(set))
    .execute();
  return getCreditAccount(ctx.db, orgId);
}

/**
 * In the transaction that looks at the projected balances (billing/projected.ts, each
 * metering tick), `owed` being each organization's usage recorded and not booked yet:
 * starts a recharge for every organization whose rule asks for one, whose projected
 * balance (booked minus owed, the number that blocks) is below the threshold and whose
 * cap allows it, in one statement for all of them (few of them recharge). Returns the
 * top-up ids it started.
 */
export async function triggerRecharges(
  tx: Tx,
  jobs: JobCatalogue,
  owed: Map<string, bigint>,
): Promise<string[]> {
  const { rows } = await sql<{ org_id: string; amount_cents: number }>`
    UPDATE payment_accounts p
       SET recharge_pending = true, recharged_cents = p.recharged_cents + p.amount_cents
      FROM credit_accounts a
      LEFT JOIN unnest(${[...owed.keys()]}::text[], ${[...owed.values()].map(String)}::numeric[])
           AS o(org_id, micros) ON o.org_id = a.org_id
     WHERE a.org_id = p.org_id
       AND p.recharge_enabled AND NOT p.recharge_pending AND p.recharge_failed_at IS NULL
       AND p.customer_id IS NOT NULL AND p.payment_method_id IS NOT NULL
       AND p.amount_cents > 0
       AND a.balance_micros - coalesce(o.micros, 0) < p.threshold_cents::numeric * 1000000
       AND p.recharged_cents + p.amount_cents <= p.cap_cents
    RETURNING p.org_id, p.amount_cents`.execute(tx);
  const started: string[] = [];
  for (const { org_id: orgId, amount_cents: amount } of rows) {
    const topupId = newId('top');
    await tx
      .insertInto('topups')
      .values({
        id: topupId,
        org_id: orgId,
        amount_cents: amount,
        origin: 'auto-recharge',
        session_id: null,
        payment_intent_id: null,
      })
      .execute();
    await enqueue(tx, jobs, RECHARGE_JOB, { topupId }, { dedupeKey: topupId });
    started.push(topupId);
  }
  return started;
}

/** Charges one pending auto-recharge top-up and settles it by the provider's answer. */
export async function runRecharge(
  ctx: ServiceContext,
  topupId: string,
  step: <T>(name: string, fn: () => Promise<T>) => Promise<T>,
): Promise<ChargeOutcome['state'] | 'settled'> {
  const t = await ctx.db
    .selectFrom('topups as t')
    .innerJoin('payment_accounts as p', 'p.org_id', 't.org_id')
    .select(['t.org_id', 't.amount_cents', 't.state', 'p.customer_id', 'p.payment_method_id'])
    .where('t.id', '=', topupId)
    .executeTakeFirst();
  if (!t || t.state !== 'pending') return 'settled';
  const provider = paymentProviderOf(ctx.config);
  const outcome: ChargeOutcome =
    provider && t.customer_id && t.payment_method_id
      ? await step('charge', () =>
          provider.charge({
            customerId: t.customer_id!,
            paymentMethodId: t.payment_method_id!,
            orgId: t.org_id,
            topupId,
            amountCents: t.amount_cents,
          }),
        )
      : { state: 'failed', reason: 'no payment provider or no saved payment method' };
  await ctx.db.transaction().execute(async (tx) => {
    const at = ctx.clock();
    if (outcome.state === 'paid') {
      const windowMs = windowMsOf(ctx);
      await settleTopup(tx, {
        id: topupId,
        at,
        windowMs,
        paymentIntentId: outcome.paymentIntentId,
      });
    } else if (outcome.state === 'failed') await failTopup(tx, topupId, at);
    // Processing: the provider's payment_intent.succeeded event settles it (events.ts).
    else {
      await tx
        .updateTable('topups')
        .set({ payment_intent_id: outcome.paymentIntentId })
        .where('id', '=', topupId)
        .execute();
    }
  });
  if (outcome.state === 'failed') {
    ctx.log.warn({ org: t.org_id, topup: topupId, reason: outcome.reason }, 'auto-recharge failed');
  }
  return outcome.state;
}

export function rechargeJob(get: () => ServiceContext) {
  return defineJob({
    kind: RECHARGE_JOB,
    payload: z.object({ topupId: z.string() }),
    maxAttempts: RECHARGE_ATTEMPTS,
    backoffMs: exponentialBackoff(2000, 5 * 60_000),
    async run({ topupId }, job) {
      const ctx = get();
      try {
        await runRecharge(ctx, topupId, job.step.bind(job));
      } catch (err) {
        // The provider never answered: on the last try the top-up fails, so that the rule
        // shows `failedAt` instead of staying `pending` for ever.
        if (job.attempt >= RECHARGE_ATTEMPTS) {
          await ctx.db.transaction().execute((tx) => failTopup(tx, topupId, ctx.clock()));
        }
        throw err;
      }
    },
  });
}
