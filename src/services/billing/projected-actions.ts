/**
 * What each metering tick does with the projected balances (projected.ts): auto-recharges
 * and blocks. Its own file because it calls the payments services, which book through the
 * ledger, which reads the projection.
 */
import { sql } from 'kysely';
import { enqueue } from '../../jobs/queue.js';
import type { Tx } from '../../store/db.js';
import type { ServiceContext } from '../context.js';
import { triggerRecharges } from '../payments/recharge.js';
import { windowMsOf } from './pricing.js';
import { unbookedMicros } from './projected.js';
import { withUsageLock } from './record.js';
import { STOP_BLOCKED_JOB } from './stop-blocked.js';

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
