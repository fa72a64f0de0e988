/**
 * Booking usage (docs/billing.md): recorded usage events booked into the ledger per
 * second by pier's booking code (`bookDue`: the usage lock, the cursor, pricing with the
 * price list in force, one entry per organization, window and usage kind with its balance
 * update and block check, in one transaction per window), against a plain batch `INSERT`
 * of the same ledger rows into a copy of the ledger table, in the same run.
 *
 * Each round records `ORGS × KINDS × EVENTS_PER_KIND` usage events in one one-second
 * window, waits for the window to close and books it (timed); the baseline inserts the
 * `ORGS × KINDS` rows that booking wrote, in one statement (timed). Both rates are
 * counted in usage events, so the ratio is pier's events/s ÷ the baseline's.
 */
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import pino from 'pino';
import { resolveConfig } from '../src/config.js';
import { JobCatalogue } from '../src/jobs/catalogue.js';
import { bookDue } from '../src/services/billing/booking.js';
import { recordUsage, type UsageRecord } from '../src/services/billing/record.js';
import type { ServiceContext } from '../src/services/context.js';
import { openStore } from '../src/store/db.js';
import { migrate } from '../src/store/migrate.js';
import { compare, type Benchmark } from './lib/benchmark.js';
import { asLoad, round, type Sample } from './lib/db-samples.js';

const ROUNDS = Number(process.env.BENCH_BOOK_ROUNDS ?? 8);
const ORGS = 200;
const KINDS = ['machine_running_seconds', 'machine_vcpu_seconds', 'machine_memory_gb_seconds'];
const EVENTS_PER_KIND = 10;
const EVENTS = ORGS * KINDS.length * EVENTS_PER_KIND;
const WINDOW_MS = 1000;
const SERVER =
  process.env.PIER_BENCH_DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/postgres';

async function withDatabase<T>(fn: (url: string) => Promise<T>): Promise<T> {
  const name = `pier_bench_book_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: SERVER });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
    const url = new URL(SERVER);
    url.pathname = `/${name}`;
    return await fn(url.toString());
  } finally {
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch(() => undefined);
    await admin.end();
  }
}

const ms = (from: bigint) => Number(process.hrtime.bigint() - from) / 1e6;

const bench: Benchmark = {
  name: 'billing-book',
  description: 'usage events booked per second vs a plain batch INSERT of the same ledger rows',
  run: () =>
    withDatabase(async (url) => {
      const store = openStore(url);
      try {
        await migrate(store.pool);
        const db = store.db;
        // Only what booking touches: the store, the clock, the window, the job kinds it
        // may enqueue (none here: every balance stays far above zero).
        const ctx = {
          db,
          clock: () => new Date(),
          config: resolveConfig({ billingWindowSeconds: WINDOW_MS / 1000 }),
          jobs: new JobCatalogue(),
          log: pino({ level: 'silent' }),
        } as unknown as ServiceContext;
        const orgs = Array.from({ length: ORGS }, (_, i) => `org_bench_${i}`);
        await store.pool.query(
          `INSERT INTO orgs (id, name, region, prepaid) SELECT o, o, 'local', true
             FROM unnest($1::text[]) AS o`,
          [orgs],
        );
        await store.pool.query(
          `INSERT INTO credit_accounts (org_id, balance_micros)
             SELECT o, 1000000000000000 FROM unnest($1::text[]) AS o`,
          [orgs],
        );
        await db
          .insertInto('price_lists')
          .values({
            prices: JSON.stringify(Object.fromEntries(KINDS.map((k, i) => [k, 7 + i]))),
            decided_at: new Date(Date.now() - 60_000),
          })
          .execute();
        await store.pool.query(
          'CREATE TABLE plain_ledger (LIKE ledger_entries INCLUDING DEFAULTS INCLUDING INDEXES)',
        );
        const rows: UsageRecord[] = orgs.flatMap((orgId) =>
          KINDS.flatMap((kind) =>
            Array.from({ length: EVENTS_PER_KIND }, (_, i) => ({
              orgId,
              kind: kind as UsageRecord['kind'],
              quantity: `${1 + i}.25`,
            })),
          ),
        );
        const pierSamples: Sample[] = [];
        const plainSamples: Sample[] = [];
        for (let r = 0; r <= ROUNDS; r++) {
          // All of a round's usage in one window: record at a window's start.
          await sleep(WINDOW_MS - (Date.now() % WINDOW_MS) + 20);
          await recordUsage(db, rows);
          await sleep(WINDOW_MS - (Date.now() % WINDOW_MS) + 20);
          let t = process.hrtime.bigint();
          const booked = await bookDue(ctx);
          const pierMs = ms(t);
          const entries = booked.reduce((n, w) => n + w.entries, 0);
          if (entries !== ORGS * KINDS.length) {
            throw new Error(`booked ${entries} entries, expected ${ORGS * KINDS.length}`);
          }
          const last = booked.at(-1)!;
          const written = await db
            .selectFrom('ledger_entries')
            .select(['org_id', 'amount_micros', 'reference', 'detail', 'at'])
            .where('kind', '=', 'usage')
            .where('window_from', '=', last.from)
            .execute();
          t = process.hrtime.bigint();
          await store.pool.query(
            `INSERT INTO plain_ledger (id, org_id, kind, amount_micros, reference, window_from,
               window_to, detail, at)
             SELECT 'p' || gen_random_uuid(), o, 'usage', a, ref, $5, $6, d, $7
               FROM unnest($1::text[], $2::numeric[], $3::text[], $4::text[]) AS u(o, a, ref, d)`,
            [
              written.map((w) => w.org_id),
              written.map((w) => w.amount_micros),
              written.map((w) => w.reference),
              written.map((w) => w.detail),
              last.from,
              last.to,
              written[0]!.at,
            ],
          );
          const plainMs = ms(t);
          if (r === 0) continue; // warm-up round
          pierSamples.push({ ms: pierMs, parts: { book: pierMs } });
          plainSamples.push({ ms: plainMs, parts: { insert: plainMs } });
        }
        const pier = asLoad(pierSamples);
        const baseline = asLoad(plainSamples);
        return compare({
          name: 'billing-book',
          baselineLabel: 'plain batch INSERT of the booked rows',
          connections: 1,
          baseline,
          pier,
          // No goal was set; booking one window must stay well inside the window itself.
          goal: { minRatio: 0, maxP99Ms: WINDOW_MS },
          notes: {
            eventsPerWindow: EVENTS,
            entriesPerWindow: ORGS * KINDS.length,
            pierEventsPerSec: round(pier.requestsPerSec * EVENTS, 0),
            baselineEventsPerSec: round(baseline.requestsPerSec * EVENTS, 0),
            rounds: ROUNDS,
          },
        });
      } finally {
        await store.close();
      }
    }),
};

export default bench;
