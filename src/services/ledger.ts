/**
 * The credit ledger (spec 2.9): every change of an organization's balance is an entry,
 * written in the same transaction as the balance itself. Amounts are micro-cents
 * (1 cent = 1,000,000 micro-cents), kept exact as numeric and passed around as bigint.
 */
import { sql } from 'kysely';
import type { LedgerEntry, LedgerKind } from '../contracts/billing.js';
import { newId } from '../crypto/tokens.js';
import type { Executor, Tx } from '../store/db.js';
import { unbookedMicros } from './billing/projected.js';

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
  /** The booking window's length: a credit's unblocking prices unbooked usage by it. */
  windowMs: number;
  reference?: string;
  detail?: string;
  at: Date;
}

/** An entry in micro-cents, with the window of usage it books, if any. */
export interface NewMicroEntry {
  kind: LedgerKind;
  micros: bigint;
  reference?: string;
  detail?: string;
  windowFrom?: Date;
  windowTo?: Date;
  at: Date;
  windowMs: number;
}

export interface Booked {
  entry: LedgerEntry;
  /** This entry blocked the account (spec 3: the balance reached zero). */
  blockedNow: boolean;
}

/**
 * Books an entry and moves the balance by the same amount, in the caller's transaction.
 * The block follows the balance in the same statement: a debit that leaves it at or below
 * zero blocks the account; a credit lifts the block when it leaves the projected balance
 * (billing/projected.ts: the balance minus the usage recorded and not booked yet) above
 * zero, so that a credit too small for what was used meanwhile does not open an account
 * that the next metering tick would block again. A usage entry already booked for its
 * organization, window and kind (`reference`) is not booked again: undefined, and the
 * balance does not move.
 */
export async function bookEntry(
  tx: Tx,
  orgId: string,
  e: NewMicroEntry,
): Promise<Booked | undefined> {
  // The row first: a booking that charges this organization waits for it (and its cursor
  // with it), so the usage not booked yet is read as it stands at this entry.
  const before = await tx
    .selectFrom('credit_accounts')
    .select('blocked_at')
    .where('org_id', '=', orgId)
    .forUpdate()
    .executeTakeFirst();
  const row = await tx
    .insertInto('ledger_entries')
    .values({
      id: newId('led'),
      org_id: orgId,
      kind: e.kind,
      amount_micros: e.micros.toString(),
      reference: e.reference ?? null,
      window_from: e.windowFrom ?? null,
      window_to: e.windowTo ?? null,
      detail: e.detail ?? null,
      at: e.at,
    })
    .onConflict((oc) =>
      oc.columns(['org_id', 'window_from', 'reference']).where('kind', '=', 'usage').doNothing(),
    )
    .returningAll()
    .executeTakeFirst();
  if (!row) return undefined;
  const unbooked =
    before?.blocked_at && e.micros > 0n
      ? ((await unbookedMicros(tx, e.windowMs, { orgId })).get(orgId) ?? 0n)
      : 0n;
  const amount = e.micros.toString();
  const cents = Math.min(Math.max(microsToCents(e.micros), 0), MAX_REFERENCE_CENTS);
  const after = await tx
    .updateTable('credit_accounts')
    .set({
      balance_micros: sql`balance_micros + ${amount}::numeric`,
      blocked_at: sql`CASE
        WHEN ${amount}::numeric > 0 AND balance_micros + ${amount}::numeric - ${unbooked.toString()}::numeric > 0 THEN NULL
        WHEN blocked_at IS NULL AND ${amount}::numeric < 0 AND balance_micros + ${amount}::numeric <= 0 THEN clock_timestamp()
        ELSE blocked_at END`,
      // The reference top-up (of the warning line) is the largest credit seen.
      reference_cents: sql`GREATEST(reference_cents, ${cents})`,
    })
    .where('org_id', '=', orgId)
    .returning('blocked_at')
    .executeTakeFirst();
  return {
    entry: toLedgerEntry(row),
    blockedNow: before?.blocked_at === null && after?.blocked_at != null,
  };
}

/** One usage entry of a window (a debit: `micros` is negative). */
export interface UsageDebit {
  orgId: string;
  micros: bigint;
  /** The usage kind: with the organization and the window, what makes the entry unique. */
  reference: string;
  detail: string;
}

/**
 * Books a whole window's usage entries at once, in the caller's transaction: one
 * statement inserts them (those already booked for their organization, window and kind
 * are skipped, as in bookEntry), sums what was inserted per organization and moves each
 * balance and block by that sum. Entry by entry this took three statements each; a
 * window of many organizations is now one round trip. Debits only, so the block a sum
 * leaves is the block the entries one after another would have left. Answers the
 * entries booked and the organizations this window blocked.
 */
export async function bookUsageDebits(
  tx: Tx,
  window: { from: Date; to: Date; at: Date },
  debits: UsageDebit[],
): Promise<{ booked: number; blockedNow: string[] }> {
  if (debits.length === 0) return { booked: 0, blockedNow: [] };
  if (debits.some((d) => d.micros >= 0n)) throw new Error('usage entries are debits');
  const { rows } = await sql<{ org_id: string; blocked_now: boolean; booked: string }>`
    WITH input AS (
      SELECT * FROM unnest(
        ${debits.map(() => newId('led'))}::text[], ${debits.map((d) => d.orgId)}::text[],
        ${debits.map((d) => d.micros.toString())}::numeric[],
        ${debits.map((d) => d.reference)}::text[], ${debits.map((d) => d.detail)}::text[]
      ) AS t(id, org_id, micros, reference, detail)
    ), inserted AS (
      INSERT INTO ledger_entries
        (id, org_id, kind, amount_micros, reference, window_from, window_to, detail, at)
      SELECT id, org_id, 'usage', micros, reference, ${window.from}, ${window.to}, detail, ${window.at}
        FROM input
      ON CONFLICT (org_id, window_from, reference) WHERE kind = 'usage' DO NOTHING
      RETURNING org_id, amount_micros
    ), sums AS (
      SELECT org_id, sum(amount_micros) AS total FROM inserted GROUP BY org_id
    ), before AS (
      -- Locked as read, before the update below (which joins it) touches the row: the
      -- block as it stood, even if a top-up committed meanwhile.
      SELECT a.org_id, a.blocked_at FROM credit_accounts a
        JOIN sums s ON s.org_id = a.org_id
       FOR UPDATE OF a
    )
    -- Debits never lift a block (the projected balance may have blocked the account
    -- while its booked balance was still above zero).
    UPDATE credit_accounts a
       SET balance_micros = a.balance_micros + s.total,
           blocked_at = CASE
             WHEN a.blocked_at IS NULL AND a.balance_micros + s.total <= 0 THEN clock_timestamp()
             ELSE a.blocked_at END
      FROM sums s JOIN before b ON b.org_id = s.org_id
     WHERE a.org_id = s.org_id
    RETURNING a.org_id, (b.blocked_at IS NULL AND a.blocked_at IS NOT NULL) AS blocked_now,
              (SELECT count(*) FROM inserted) AS booked`.execute(tx);
  return {
    booked: Number(rows[0]?.booked ?? 0),
    blockedNow: rows.filter((r) => r.blocked_now).map((r) => r.org_id),
  };
}

/** Books a whole-cent entry (grants, top-ups) and moves the balance; see bookEntry. */
export async function addLedgerEntry(tx: Tx, orgId: string, e: NewEntry): Promise<LedgerEntry> {
  const booked = await bookEntry(tx, orgId, {
    kind: e.kind,
    micros: BigInt(e.cents) * MICROS_PER_CENT,
    reference: e.reference,
    detail: e.detail,
    at: e.at,
    windowMs: e.windowMs,
  });
  if (!booked) throw new Error('a non-usage ledger entry was not booked');
  return booked.entry;
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
