/**
 * The credit account as customers read it (spec 2.9, 4.7) and operator grants. Prices,
 * metering, booking and blocking are in billing/ (docs/billing.md). A grant that brings
 * the balance above zero lifts a block in its own transaction (ledger.ts).
 */
import type { CreditAccount, GrantBody, LedgerEntry } from '../contracts/billing.js';
import { ApiError, notFound } from '../errors/api-error.js';
import type { Executor } from '../store/db.js';
import type { ServiceContext } from './context.js';
import { pricedKinds } from './billing/prices.js';
import { windowMsOf } from './billing/pricing.js';
import { addLedgerEntry, listLedger, microsToCents } from './ledger.js';

export async function getCreditAccount(ex: Executor, orgId: string): Promise<CreditAccount> {
  const row = await ex
    .selectFrom('credit_accounts as a')
    .innerJoin('orgs as o', 'o.id', 'a.org_id')
    .select([
      'a.org_id',
      'a.balance_micros',
      'a.blocked_at',
      'a.warn_at_percent',
      'a.min_topup_cents',
      'a.reference_cents',
      'o.prepaid',
    ])
    .where('a.org_id', '=', orgId)
    .executeTakeFirst();
  if (!row) throw new ApiError('not-prepaid', 'This organization has no prepaid credit account.');
  const micros = BigInt(String(row.balance_micros));
  const cents = microsToCents(micros);
  const warnLine = (row.reference_cents * row.warn_at_percent) / 100;
  return {
    orgId: row.org_id,
    currency: 'EUR',
    prepaid: row.prepaid,
    balanceMicros: micros.toString(),
    balanceCents: cents,
    blocked: row.blocked_at !== null,
    blockedAt: row.blocked_at?.toISOString() ?? null,
    warned: row.reference_cents > 0 && cents < warnLine,
    warnAtPercent: row.warn_at_percent,
    minTopupCents: row.min_topup_cents,
    priced: await pricedKinds(ex),
    autoRecharge: await autoRechargeOf(ex, orgId),
  };
}

/** The auto-recharge rule and its state (services/payments/recharge.ts); off until set. */
async function autoRechargeOf(ex: Executor, orgId: string): Promise<CreditAccount['autoRecharge']> {
  const p = await ex
    .selectFrom('payment_accounts')
    .selectAll()
    .where('org_id', '=', orgId)
    .executeTakeFirst();
  return {
    enabled: p?.recharge_enabled ?? false,
    thresholdCents: p?.threshold_cents ?? 0,
    amountCents: p?.amount_cents ?? 0,
    capCents: p?.cap_cents ?? 0,
    pending: p?.recharge_pending ?? false,
    failedAt: p?.recharge_failed_at?.toISOString() ?? null,
    hasPaymentMethod: p?.payment_method_id != null,
  };
}

export async function ledgerOf(ctx: ServiceContext, orgId: string, limit: number) {
  await getCreditAccount(ctx.db, orgId);
  return {
    orgId,
    currency: 'EUR' as const,
    limit,
    entries: await listLedger(ctx.db, orgId, limit),
  };
}

export async function grantCredit(
  ctx: ServiceContext,
  orgId: string,
  body: GrantBody,
): Promise<LedgerEntry> {
  return ctx.db.transaction().execute(async (tx) => {
    const org = await tx.selectFrom('orgs').select('id').where('id', '=', orgId).executeTakeFirst();
    if (!org) throw notFound('Organization');
    await getCreditAccount(tx, orgId);
    return addLedgerEntry(tx, orgId, {
      kind: 'grant',
      cents: body.amountCents,
      reference: 'operator',
      detail: body.reason ?? 'operator grant',
      at: ctx.clock(),
      windowMs: windowMsOf(ctx),
    });
  });
}
