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
import type { Executor } from '../../store/db.js';
import { priceLists } from './prices.js';
import { priceUsage } from './pricing.js';

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
