/**
 * A price list decided in the middle of a booking window (the default window, an hour)
 * prices the usage recorded from its moment on, not from the next window: the window's
 * entry is made of one part per list, summed exactly and rounded once, the same on every
 * booking and in the preview, and the ledger sums to the balance to the micro-cent.
 */
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bookDue } from '../../src/services/billing/booking.js';
import { recordUsage } from '../../src/services/billing/record.js';
import { startTestPlatform, type TestOrg, type TestPlatform } from '../helpers/platform.js';
import { expectLedgerSumsToBalance } from './payment-bed.js';

const HOUR = 3600_000;
let tp: TestPlatform;

beforeAll(async () => {
  tp = await startTestPlatform();
  expect(tp.platform.ctx.config.billingWindowSeconds).toBe(3600);
});
afterAll(async () => tp?.close());

const req = (org: TestOrg, method: string, p: string) =>
  tp.request(method, p, { token: org.token });

interface Entry {
  kind: string;
  amountMicros: string;
  reference: string;
  windowFrom: string;
  detail: string;
}

async function usageEntries(org: TestOrg): Promise<Entry[]> {
  const res = await req(org, 'GET', '/v1/billing/ledger?limit=500');
  return res.body.entries.filter((e: Entry) => e.kind === 'usage');
}

describe('a price list decided mid-window', () => {
  it('books a past window pro rata by the lists in force when its usage was recorded', async () => {
    const org = await tp.createOrg({ grantCents: 100 });
    const db = tp.platform.ctx.db;
    // A closed window two hours back, with its lists and usage as recorded then: the
    // first list at its start, a second one at 20 minutes past.
    const h = Math.floor(Date.now() / HOUR) * HOUR - 2 * HOUR;
    const at = (minutes: number) => new Date(h + minutes * 60_000);
    // Its account was open then (usage is priced from the window an account opens in).
    await sql`UPDATE credit_accounts SET created_at = ${at(-60)} WHERE org_id = ${org.id}`.execute(
      db,
    );
    await db
      .insertInto('price_lists')
      .values([
        { prices: JSON.stringify({ machine_running_seconds: 7 }), decided_at: at(0) },
        {
          prices: JSON.stringify({ machine_running_seconds: 9, machine_memory_gb_seconds: 3 }),
          decided_at: at(20),
        },
      ])
      .execute();
    const usage = (kind: string, quantity: string, when: Date) =>
      sql`INSERT INTO usage_events (org_id, kind, quantity, subject, at)
          VALUES (${org.id}, ${kind}, ${quantity}::numeric, 'mach_x', ${when})`.execute(db);
    await usage('machine_running_seconds', '600', at(10)); // × 7
    await usage('machine_running_seconds', '0.5', new Date(at(20).getTime() - 1)); // × 7
    await usage('machine_running_seconds', '0.5', at(20)); // × 9: its moment is the list's
    await usage('machine_running_seconds', '1200.001', at(40)); // × 9
    await usage('machine_memory_gb_seconds', '5', at(10)); // no price before 10:20
    await usage('machine_memory_gb_seconds', '0.5', at(30)); // × 3
    // The booker resumes at that window (as after downtime).
    await db
      .insertInto('billing_cursor')
      .values({ booked_until: at(0) })
      .onConflict((oc) => oc.column('id').doUpdateSet({ booked_until: at(0) }))
      .execute();
    await bookDue(tp.platform.ctx);

    const entries = await usageEntries(org);
    const by = Object.fromEntries(entries.map((e) => [e.reference, e]));
    // 600.5 × 7 + 1200.501 × 9 = 4203.5 + 10804.509 = 15008.009 → 15008 (rounded once;
    // part by part it would be 4204 + 10805). The whole window at the first list's
    // price, as before, would be 12607.
    expect(by.machine_running_seconds).toMatchObject({
      amountMicros: '-15008',
      windowFrom: at(0).toISOString(),
      detail:
        'machine_running_seconds: 600.5 second × 7 micro-cents + 1200.501 second × 9 micro-cents',
    });
    // 0.5 × 3 = 1.5 → 2; the 5 GB-seconds recorded before the list had no price.
    expect(by.machine_memory_gb_seconds).toMatchObject({ amountMicros: '-2' });
    expect(entries).toHaveLength(2);
    const credits = (await req(org, 'GET', '/v1/billing/credits')).body;
    expect(credits.balanceMicros).toBe(String(100_000_000 - 15_008 - 2));
    await expectLedgerSumsToBalance(tp, org.token);

    // The preview of the window prices it with the same function: the same amounts.
    const preview = await req(
      org,
      'GET',
      `/v1/billing/preview?from=${at(0).toISOString()}&to=${at(60).toISOString()}`,
    );
    const lines = Object.fromEntries(preview.body.lines.map((l: { kind: string }) => [l.kind, l]));
    expect(lines.machine_running_seconds).toMatchObject({
      quantity: 1801.001,
      priceMicros: 9,
      amountMicros: '15008',
    });
    expect(lines.machine_memory_gb_seconds).toMatchObject({ quantity: 5.5, amountMicros: '2' });
    expect(preview.body.totalMicros).toBe('15010');

    // Replayed: booking again, or from a cursor set back, books nothing twice.
    await bookDue(tp.platform.ctx);
    await db
      .updateTable('billing_cursor')
      .set({ booked_until: at(0) })
      .execute();
    await bookDue(tp.platform.ctx);
    expect(await usageEntries(org)).toHaveLength(2);
    expect((await req(org, 'GET', '/v1/billing/credits')).body.balanceMicros).toBe(
      credits.balanceMicros,
    );
  });

  it('prices usage of the open window from the moment an operator decides a list', async () => {
    const org = await tp.createOrg({ grantCents: 100 });
    const from = new Date(Math.floor(Date.now() / HOUR) * HOUR);
    const decide = async (price: number) => {
      const res = await tp.admin('PUT', '/admin/v1/prices', {
        prices: { machine_running_seconds: price },
      });
      expect(res.status).toBe(200);
    };
    const run = (quantity: string) =>
      recordUsage(tp.platform.ctx.db, [
        { orgId: org.id, kind: 'machine_running_seconds', quantity },
      ]);
    await decide(11);
    await run('10.25');
    await decide(13);
    await run('3.5');
    // 10.25 × 11 + 3.5 × 13 = 112.75 + 45.5 = 158.25 → 158.
    const preview = await req(
      org,
      'GET',
      `/v1/billing/preview?from=${from.toISOString()}&to=${new Date(Date.now() + 1000).toISOString()}`,
    );
    expect(preview.status).toBe(200);
    expect(preview.body.unpricedReason).toBeUndefined();
    const line = preview.body.lines.find(
      (l: { kind: string }) => l.kind === 'machine_running_seconds',
    );
    expect(line).toMatchObject({ quantity: 13.75, priceMicros: 13, amountMicros: '158' });
  });
});
