/**
 * The one path by which paid money becomes credit: a pending top-up turns `paid` and its
 * ledger entry (kind `topup`, reference the top-up id) is booked with the balance, all in
 * the caller's transaction. A top-up already paid books nothing, and the unique index of
 * top-up entries (migration 0018) would refuse a second entry anyway: whatever the
 * provider repeats, a top-up is credited once. The entry lifts a block when it leaves the
 * balance above zero (ledger.ts bookEntry), at the commit of this transaction.
 */
import { sql } from 'kysely';
import type { LedgerEntry } from '../../contracts/billing.js';
import type { Tx } from '../../store/db.js';
import { addLedgerEntry } from '../ledger.js';

export async function settleTopup(
  tx: Tx,
  topup: { id: string; at: Date; windowMs: number; paymentIntentId?: string },
): Promise<LedgerEntry | undefined> {
  const { id: topupId, at, paymentIntentId } = topup;
  const t = await tx
    .updateTable('topups')
    .set({
      state: 'paid',
      settled_at: at,
      payment_intent_id: sql<
        string | null
      >`COALESCE(${paymentIntentId ?? null}, payment_intent_id)`,
    })
    .where('id', '=', topupId)
    .where('state', '=', 'pending')
    .returning(['id', 'org_id', 'amount_cents', 'origin'])
    .executeTakeFirst();
  if (!t) return undefined;
  if (t.origin === 'auto-recharge') {
    await tx
      .updateTable('payment_accounts')
      .set({ recharge_pending: false, recharge_failed_at: null })
      .where('org_id', '=', t.org_id)
      .execute();
  }
  return addLedgerEntry(tx, t.org_id, {
    kind: 'topup',
    cents: t.amount_cents,
    reference: t.id,
    detail: t.origin === 'checkout' ? 'top-up (checkout)' : 'auto-recharge',
    at,
    windowMs: topup.windowMs,
  });
}

/** A top-up the provider refused: failed, and an auto-recharge gives its share of the cap back. */
export async function failTopup(tx: Tx, topupId: string, at: Date): Promise<void> {
  const t = await tx
    .updateTable('topups')
    .set({ state: 'failed', settled_at: at })
    .where('id', '=', topupId)
    .where('state', '=', 'pending')
    .returning(['org_id', 'amount_cents', 'origin'])
    .executeTakeFirst();
  if (!t || t.origin !== 'auto-recharge') return;
  await tx
    .updateTable('payment_accounts')
    .set({
      recharge_pending: false,
      recharge_failed_at: at,
      recharged_cents: sql<string>`GREATEST(recharged_cents - ${t.amount_cents}, 0)`,
    })
    .where('org_id', '=', t.org_id)
    .execute();
}
