/**
 * The durable work of billing: booking closed windows (enqueued now and then, deduplicated
 * so that many replicas keep one in the queue; a crash mid-booking leaves the job to
 * another worker, and the cursor to resume from) and stopping blocked organizations'
 * machines and databases. Metering and the projected balance's block share one tick.
 */
import { z } from 'zod';
import { defineJob, exponentialBackoff } from '../../jobs/catalogue.js';
import { enqueue } from '../../jobs/queue.js';
import type { ServiceContext } from '../context.js';
import { everyInterval } from '../ticker.js';
import { bookDue } from './booking.js';
import { windowMsOf } from './pricing.js';
import { rechargeJob } from '../payments/recharge.js';
import { meterStorage } from './meter-storage.js';
import { meterRunning } from '../machines/metering.js';
import { actOnProjectedBalances } from './projected.js';
import { stopBlockedJob } from './stop-blocked.js';

export const BOOK_JOB = 'billing.book';

export function billingJobs(get: () => ServiceContext) {
  return [
    defineJob({
      kind: BOOK_JOB,
      payload: z.object({}),
      maxAttempts: 5,
      backoffMs: exponentialBackoff(5000),
      async run() {
        await bookDue(get());
      },
    }),
    stopBlockedJob(get),
    rechargeJob(get),
  ];
}

/** Enqueues a booking once a window has closed since the cursor (one job per window). */
async function enqueueIfDue(ctx: ServiceContext): Promise<void> {
  const cursor = await ctx.db
    .selectFrom('billing_cursor')
    .select('booked_until')
    .executeTakeFirst();
  if (cursor && cursor.booked_until.getTime() + windowMsOf(ctx) > Date.now()) return;
  await enqueue(ctx.db, ctx.jobs, BOOK_JOB, {}, { dedupeKey: 'periodic' });
}

/**
 * One metering tick: records machines' running time and what is kept, then starts the
 * auto-recharges and blocks the organizations that the projected balance asks for
 * (projected.ts). The block
 * therefore comes within one tick (`PIER_METERING_INTERVAL_MS`, 60 s by default) of the
 * projected balance reaching zero.
 */
export async function meteringTick(ctx: ServiceContext): Promise<void> {
  await meterRunning(ctx.db);
  await meterStorage(ctx.db);
  await actOnProjectedBalances(ctx);
}

/**
 * Meters every `meteringIntervalMs` and asks for a booking when a window has closed
 * (looked at every window, at least every minute); returns a stopper.
 */
export function scheduleBilling(ctx: ServiceContext): () => void {
  const stopMeter = everyInterval(ctx.log, 'metering', ctx.config.meteringIntervalMs, () =>
    meteringTick(ctx),
  );
  const stopBook = everyInterval(
    ctx.log,
    'booking schedule',
    Math.min(windowMsOf(ctx), 60_000),
    () => enqueueIfDue(ctx),
    1000,
  );
  return () => {
    stopMeter();
    stopBook();
  };
}
