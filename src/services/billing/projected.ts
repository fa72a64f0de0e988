/**
 * The projected balance (spec behaviour 4, part 3: machines stop when credit reaches
 * zero): the booked balance minus the usage recorded and not booked yet, priced by the
 * function that books (pricing.ts), window by window and kind by kind, so that booking
 * moves an amount from "recorded" to "booked" and leaves the projection where it was.
 *
 * Usage is booked once per window (an hour by default), but recorded every metering
 * tick; so the block follows the projection, looked at right after each tick's
 * recording (jobs.ts), on every replica: an organization is blocked within one tick of
 * its projected balance reaching zero, not at the next window's booking. Auto-recharge
 * looks at the same number at the same moment.
 */
import { sql } from 'kysely';
import { enqueue } from '../../jobs/queue.js';
import type { Executor, Tx } from '../../store/db.js';
import type { ServiceContext } from '../context.js';
import { priceLists } from './prices.js';
import { priceUsage, windowMsOf } from './pricing.js';
import { withUsageLock } from './record.js';
import { STOP_BLOCKED_JOB } from './stop-blocked.js';
import { triggerRecharges } from '../payments/recharge.js';

/** Later than any usage: the projection runs to whatever was recorded last. */
const END_OF_TIME = new Date('9999-01-01T00:00:00Z');

/**
 * What the usage recorded since the booking cursor costs, per organization (only those
 * with a priced amount). The caller makes the read consistent with booking: under the
 * writers' lock (no booking commits meanwhile), or holding the organization's credit row
 * (a booking that charges it waits for that row, its cursor with it).
 */
export async function unbookedMicros(
  ex: Executor,
  windowMs: number,
  only: { orgId?: string } = {},
): Promise<Map<string, bigint>> {
  const cursor = await ex.selectFrom('billing_cursor').select('booked_until').executeTakeFirst();
  const priced = await priceUsage(ex, {
    from: cursor?.booked_until ?? new Date(0),
    to: END_OF_TIME,
    windowMs,
    lists: await priceLists(ex),
    ...only,
  });
  const owed = new Map<string, bigint>();
  for (const u of priced) {
    if (!u.amountMicros) continue;
    owed.set(u.orgId, (owed.get(u.orgId) ?? 0n) + u.amountMicros);
  }
  return owed;
}

export interface ProjectedActions {
  /** The organizations this call blocked. */
  blocked: string[];
  /** The auto-recharge top-ups this call started. */
  recharges: string[];
}

/**
 * Acts on every organization's projected balance, in one transaction: starts the
 * auto-recharges whose threshold it is below (payments/recharge.ts), then blocks every
 * open organization whose projected balance is at or below zero and enqueues the stop of
 * its machines and databases. So a recharge starts on the number that blocks, at the
 * same tick, and an organization whose threshold is above what it uses while the charge
 * is made is topped up before it is blocked. Each replica runs this after its metering
 * tick; both changes are conditional updates (`blocked_at IS NULL`, `NOT
 * recharge_pending`), so of replicas that see the same number, one acts and the others
 * find it done.
 */
export async function actOnProjectedBalances(ctx: ServiceContext): Promise<ProjectedActions> {
  return withUsageLock(ctx.db, async (tx) => {
    const owed = await unbookedMicros(tx, windowMsOf(ctx));
    const recharges = await triggerRecharges(tx, ctx.jobs, owed);
    const blocked = owed.size === 0 ? [] : await blockOwing(tx, owed);
    for (const orgId of blocked) {
      await enqueue(tx, ctx.jobs, STOP_BLOCKED_JOB, { orgId }, { dedupeKey: orgId });
    }
    if (blocked.length > 0) ctx.log.info({ orgs: blocked }, 'credit blocked at projected zero');
    return { blocked, recharges };
  });
}

async function blockOwing(tx: Tx, owed: Map<string, bigint>): Promise<string[]> {
  const { rows } = await sql<{ org_id: string }>`
    UPDATE credit_accounts a SET blocked_at = clock_timestamp()
      FROM unnest(${[...owed.keys()]}::text[], ${[...owed.values()].map(String)}::numeric[])
           AS o(org_id, micros)
     WHERE a.org_id = o.org_id AND a.blocked_at IS NULL AND a.balance_micros - o.micros <= 0
    RETURNING a.org_id`.execute(tx);
  return rows.map((r) => r.org_id);
}
