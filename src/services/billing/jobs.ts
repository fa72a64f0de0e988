/**
 * The durable work of billing: booking closed windows (enqueued now and then, deduplicated
 * so that many replicas keep one in the queue; a crash mid-booking leaves the job to
 * another worker, and the cursor to resume from) and stopping blocked organizations'
 * machines. Storage is metered on a ticker beside machines' running time.
 */
import { z } from 'zod';
import { defineJob, exponentialBackoff } from '../../jobs/catalogue.js';
import { enqueue } from '../../jobs/queue.js';
import type { ServiceContext } from '../context.js';
import { everyInterval } from '../ticker.js';
import { bookDue, windowMsOf } from './booking.js';
import { rechargeJob } from '../payments/recharge.js';
import { meterStorage } from './meter-storage.js';
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
 * Meters storage every `meteringIntervalMs` and asks for a booking when a window has
 * closed (looked at every window, at least every minute); returns a stopper.
 */
export function scheduleBilling(ctx: ServiceContext): () => void {
  const stopMeter = everyInterval(ctx.log, 'storage metering', ctx.config.meteringIntervalMs, () =>
    meterStorage(ctx.db),
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
