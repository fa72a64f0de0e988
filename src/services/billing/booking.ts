/**
 * Booking: recorded usage becomes ledger entries of kind `usage`, one per organization,
 * window and usage kind, in window order, each window in one transaction with the
 * balances it moves and the cursor it advances. The cursor makes a restart or a second
 * replica resume exactly where booking stopped (no window skipped); the unique index of
 * usage entries (migration 0016) makes booking a window twice impossible even if the
 * cursor were wrong. Windows without recorded usage are passed over at once, so catching
 * up after downtime costs one transaction per window that has usage.
 */
import { sql } from 'kysely';
import { enqueue } from '../../jobs/queue.js';
import type { Tx } from '../../store/db.js';
import type { ServiceContext } from '../context.js';
import { bookUsageDebits, type UsageDebit } from '../ledger.js';
import { priceLists } from './prices.js';
import { priceUsage, unitOf, windowMsOf, windowStart } from './pricing.js';
import { USAGE_LOCK } from './record.js';
import { STOP_BLOCKED_JOB } from './stop-blocked.js';

export interface BookedWindow {
  from: Date;
  to: Date;
  entries: number;
  blocked: string[];
}

/** The priced parts of an entry: `12.000 second × 7 micro-cents + 3.000 second × 9 …`. */
function detailOf(kind: string, parts: { quantity: string; priceMicros: number }[]): string {
  return parts
    .map((p) => `${p.quantity} ${unitOf(kind)} × ${p.priceMicros} micro-cents`)
    .join(' + ');
}

/** Books the next closed window that has usage, or moves the cursor to the open one. */
async function bookNextWindow(ctx: ServiceContext, tx: Tx): Promise<BookedWindow | undefined> {
  const windowMs = windowMsOf(ctx);
  // Exclusive: every writer of usage stamped before `closedBefore` has committed (record.ts).
  await sql`SELECT pg_advisory_xact_lock(${USAGE_LOCK})`.execute(tx);
  const closedBefore = (await sql<{ now: Date }>`SELECT clock_timestamp() AS now`.execute(tx))
    .rows[0]!.now;
  // The first booking starts at the window of the oldest usage recorded.
  const oldest = (
    await tx
      .selectFrom('usage_events')
      .select((eb) => eb.fn.min('at').as('at'))
      .executeTakeFirst()
  )?.at as Date | null | undefined;
  await tx
    .insertInto('billing_cursor')
    .values({ booked_until: windowStart(oldest ?? closedBefore, windowMs) })
    .onConflict((oc) => oc.column('id').doNothing())
    .execute();
  const cursor = (
    await tx
      .selectFrom('billing_cursor')
      .select('booked_until')
      .forUpdate()
      .executeTakeFirstOrThrow()
  ).booked_until;
  const next = (
    await tx
      .selectFrom('usage_events')
      .select((eb) => eb.fn.min('at').as('at'))
      .where('at', '>=', cursor)
      .executeTakeFirst()
  )?.at as Date | null | undefined;
  const slot = next ? windowStart(next, windowMs) : undefined;
  if (!slot || slot.getTime() + windowMs > closedBefore.getTime()) {
    // Nothing closed is left to book: every window before the open one is done.
    const open = windowStart(closedBefore, windowMs);
    if (open > cursor) {
      await tx.updateTable('billing_cursor').set({ booked_until: open }).execute();
    }
    return undefined;
  }
  const from = slot > cursor ? slot : cursor;
  const to = new Date(slot.getTime() + windowMs);
  const priced = await priceUsage(tx, { from, to, windowMs, lists: await priceLists(tx) });
  const debits: UsageDebit[] = priced
    // Unpriced, free, or less than half a micro-cent: no entry.
    .filter((u): u is typeof u & { amountMicros: bigint } => (u.amountMicros ?? 0n) > 0n)
    .map((u) => ({
      orgId: u.orgId,
      micros: -u.amountMicros,
      reference: u.kind,
      detail: `${u.kind}: ${detailOf(u.kind, u.parts!)}`,
    }));
  const { booked, blockedNow: blocked } = await bookUsageDebits(
    tx,
    { from, to, at: ctx.clock() },
    debits,
  );
  for (const orgId of blocked) {
    // With the block, in its transaction: the machines stop even if this process dies.
    await enqueue(tx, ctx.jobs, STOP_BLOCKED_JOB, { orgId }, { dedupeKey: orgId });
  }
  // Auto-recharge is not started here: booking leaves the projected balance where it was,
  // and the metering tick starts recharges on it (projected.ts).
  await tx.updateTable('billing_cursor').set({ booked_until: to }).execute();
  return { from, to, entries: booked, blocked };
}

/** Books every closed window not booked yet; returns what it booked. */
export async function bookDue(ctx: ServiceContext): Promise<BookedWindow[]> {
  const done: BookedWindow[] = [];
  for (;;) {
    const w = await ctx.db.transaction().execute((tx) => bookNextWindow(ctx, tx));
    if (!w) return done;
    done.push(w);
  }
}
