/**
 * The credit ledger (spec 2.9): every change of an organization's balance is an entry,
 * written in the same transaction as the balance itself. Amounts are micro-cents
 * (1 cent = 1,000,000 micro-cents), kept exact as numeric and passed around as bigint.
 */
import { sql } from 'kysely';
import type { LedgerEntry, LedgerKind } from '../contracts/billing.js';
import { newId } from '../crypto/tokens.js';
import type { Executor, Tx } from '../store/db.js';

export const MICROS_PER_CENT = 1_000_000n;
/** The largest value of the integer column `credit_accounts.reference_cents`. */
const MAX_REFERENCE_CENTS = 2_147_483_647;

/** Whole cents of a micro-cent amount, rounded down (toward minus infinity). */
export function microsToCents(micros: bigint): number {
  const q = micros / MICROS_PER_CENT;
  return Number(micros < 0n && micros % MICROS_PER_CENT !== 0n ? q - 1n : q);
}

type EntryRow = {
  id: string;
  kind: LedgerKind;
  amount_micros: string;
  reference: string | null;
  window_from: Date | null;
  window_to: Date | null;
  detail: string | null;
  at: Date;
};

export function toLedgerEntry(r: EntryRow): LedgerEntry {
  const micros = BigInt(r.amount_micros);
  return {
    id: r.id,
    kind: r.kind,
    amountMicros: micros.toString(),
    amountCents: microsToCents(micros),
    reference: r.reference,
    windowFrom: r.window_from?.toISOString() ?? null,
    windowTo: r.window_to?.toISOString() ?? null,
    detail: r.detail,
    at: r.at.toISOString(),
  };
}

export interface NewEntry {
  kind: LedgerKind;
  cents: number;
  reference?: string;
  detail?: string;
  at: Date;
}

/** Books an entry and moves the balance by the same amount, in the caller's transaction. */
export async function addLedgerEntry(tx: Tx, orgId: string, e: NewEntry): Promise<LedgerEntry> {
  const micros = BigInt(e.cents) * MICROS_PER_CENT;
  const row = await tx
    .insertInto('ledger_entries')
    .values({
      id: newId('led'),
      org_id: orgId,
      kind: e.kind,
      amount_micros: micros.toString(),
      reference: e.reference ?? null,
      window_from: null,
      window_to: null,
      detail: e.detail ?? null,
      at: e.at,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
  await tx
    .updateTable('credit_accounts')
    .set({
      balance_micros: sql`balance_micros + ${micros.toString()}::numeric`,
      // A positive entry lifts a block; the reference top-up is the largest credit seen.
      blocked_at: sql`CASE WHEN balance_micros + ${micros.toString()}::numeric > 0 THEN NULL ELSE blocked_at END`,
      // reference_cents is an integer column; grants may be larger (up to 1e12 cents).
      reference_cents: sql`GREATEST(reference_cents, ${Math.min(Math.max(e.cents, 0), MAX_REFERENCE_CENTS)})`,
    })
    .where('org_id', '=', orgId)
    .execute();
  return toLedgerEntry(row);
}

export async function listLedger(
  ex: Executor,
  orgId: string,
  limit: number,
): Promise<LedgerEntry[]> {
  const rows = await ex
    .selectFrom('ledger_entries')
    .selectAll()
    .where('org_id', '=', orgId)
    .orderBy('at', 'desc')
    .orderBy('seq', 'desc')
    .limit(limit)
    .execute();
  return rows.map(toLedgerEntry);
}
