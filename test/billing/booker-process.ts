/**
 * The booker in a process of its own, so a test can kill it with SIGKILL in the middle of
 * booking a window. argv: database URL, window seconds. Books what is due, then exits.
 */
import pino from 'pino';
import { JobCatalogue } from '../../src/jobs/catalogue.js';
import { bookDue } from '../../src/services/billing/booking.js';
import { billingJobs } from '../../src/services/billing/jobs.js';
import type { ServiceContext } from '../../src/services/context.js';
import { openStore } from '../../src/store/db.js';

const [url, windowSeconds] = process.argv.slice(2) as [string, string];
const store = openStore(url);
// Booking needs the store, its settings, the clock and the job catalogue (for the stops).
const ctx = {
  db: store.db,
  config: { billingWindowSeconds: Number(windowSeconds) },
  clock: () => new Date(),
  log: pino({ level: 'silent' }),
} as unknown as ServiceContext;
ctx.jobs = new JobCatalogue(billingJobs(() => ctx));
console.log('booking');
await bookDue(ctx);
await store.close();
