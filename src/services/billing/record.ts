/**
 * Recording usage so that booking never misses any (services/billing/booking.ts).
 *
 * A usage event is stamped with the moment it is written (`at`, which decides its booking
 * window; `since`, where the interval it measures began, only shares it among price
 * lists), and a window is booked once it has closed. The danger is an event stamped before a window's end whose transaction
 * commits after the booker read the window. So every writer of usage holds a shared
 * advisory lock and takes its timestamp only once it has the lock (`clock_timestamp()`,
 * not the transaction's start); the booker takes the same lock exclusively and books only
 * windows that closed before it held the lock. Every event stamped before that moment
 * was committed by then, and every later one is stamped later.
 */
import { sql } from 'kysely';
import type { Executor, Tx } from '../../store/db.js';
import type { UsageKind } from '../../contracts/usage-kinds.js';

/** The advisory lock between writers of usage (shared) and the booker (exclusive). */
export const USAGE_LOCK = 7_411_900_016;

/** Runs `fn` in a transaction (the caller's, or a new one) holding the writers' lock. */
export async function withUsageLock<T>(ex: Executor, fn: (tx: Tx) => Promise<T>): Promise<T> {
  const run = async (tx: Tx) => {
    await sql`SELECT pg_advisory_xact_lock_shared(${USAGE_LOCK})`.execute(tx);
    return fn(tx);
  };
  if (ex.isTransaction) return run(ex as Tx);
  return ex.transaction().execute(run);
}

export interface UsageRecord {
  orgId: string;
  kind: UsageKind;
  /** A non-negative decimal: a number or a decimal string. */
  quantity: number | string;
  /** What the usage is of (a machine, volume, database or bucket id). */
  subject?: string;
  /**
   * Start of the interval the quantity measures, which ends now; absent: an instant, now.
   * Priced pro rata over the lists in force during it (pricing.ts).
   */
  since?: Date;
}

/** Records usage events now, as every meter of pier does. */
export async function recordUsage(ex: Executor, records: UsageRecord[]): Promise<void> {
  if (records.length === 0) return;
  await withUsageLock(ex, async (tx) => {
    // One moment for the statement, read once the lock is held; an interval ends there.
    await sql`WITH t AS MATERIALIZED (SELECT clock_timestamp() AS now)
      INSERT INTO usage_events (org_id, kind, quantity, subject, since, at)
      SELECT r.org_id, r.kind, r.quantity::numeric, r.subject,
        least(coalesce(r.since, t.now), t.now), t.now
      FROM t, jsonb_to_recordset(${JSON.stringify(
        records.map((r) => ({
          org_id: r.orgId,
          kind: r.kind,
          quantity: String(r.quantity),
          subject: r.subject ?? null,
          since: r.since?.toISOString() ?? null,
        })),
      )}::jsonb) AS r(org_id text, kind text, quantity text, subject text, since timestamptz)`.execute(
      tx,
    );
  });
}
