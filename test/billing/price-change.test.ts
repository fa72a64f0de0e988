/**
 * A price list decided in the middle of a booking window (the default window, an hour)
 * prices the usage from its moment on, not from the next window, and not from the next
 * metering tick either: each event is shared among the lists in force over the interval
 * it measures. The window's entry is made of one part per list, summed exactly and
 * rounded once, the same on every booking and in the preview, and the ledger sums to the
 * balance to the micro-cent.
 */
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bookDue } from '../../src/services/billing/booking.js';
import { meterStorage } from '../../src/services/billing/meter-storage.js';
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

const req = (org: TestOrg, method: string, p: string, body?: unknown) =>
  tp.request(method, p, { token: org.token, body });

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

  it('prices the part of a metering tick after a list’s moment by that list, exactly', async () => {
    const org = await tp.createOrg({ grantCents: 100 });
    const db = tp.platform.ctx.db;
    // A closed window five hours back, its own lists: 7 then, from 20 past, 9 micro-cents
    // per running second (and 1 then 2 cents per memory GB-second).
    const h = Math.floor(Date.now() / HOUR) * HOUR - 5 * HOUR;
    const at = (minutes: number, ms = 0) => new Date(h + minutes * 60_000 + ms);
    await sql`UPDATE credit_accounts SET created_at = ${at(-60)} WHERE org_id = ${org.id}`.execute(
      db,
    );
    await db
      .insertInto('price_lists')
      .values([
        {
          prices: JSON.stringify({ machine_running_seconds: 7, machine_memory_gb_seconds: 1e6 }),
          decided_at: at(0),
        },
        {
          prices: JSON.stringify({ machine_running_seconds: 9, machine_memory_gb_seconds: 2e6 }),
          decided_at: at(20),
        },
      ])
      .execute();
    // Each event measures [since, at), as a metering tick records the time since the last.
    const usage = (kind: string, quantity: string, since: Date, when: Date) =>
      sql`INSERT INTO usage_events (org_id, kind, quantity, subject, since, at)
          VALUES (${org.id}, ${kind}, ${quantity}::numeric, 'mach_t', ${since}, ${when})`.execute(
        db,
      );
    const run = 'machine_running_seconds';
    await usage(run, '60.000', at(19), at(20)); // ends at the list's moment: all × 7
    await usage(run, '60.000', at(20, -30_000), at(20, 30_000)); // 30 s × 7 + 30 s × 9
    await usage(run, '60.000', at(30), at(31)); // all × 9
    // A third under the first list, two thirds under the second: no finite decimal.
    await usage('machine_memory_gb_seconds', '1', at(20, -1000), at(20, 2000));
    await db
      .insertInto('billing_cursor')
      .values({ booked_until: at(0) })
      .onConflict((oc) => oc.column('id').doUpdateSet({ booked_until: at(0) }))
      .execute();
    await bookDue(tp.platform.ctx);

    const by = Object.fromEntries((await usageEntries(org)).map((e) => [e.reference, e]));
    // 90 s × 7 + 90 s × 9 = 1440; priced by the moment each tick was recorded (the first
    // one at the list's very moment) it would be 180 × 9 = 1620.
    expect(by.machine_running_seconds).toMatchObject({
      amountMicros: '-1440',
      windowFrom: at(0).toISOString(),
      detail: `${run}: 90.000 second × 7 micro-cents + 90.000 second × 9 micro-cents`,
    });
    // 1/3 × 1,000,000 + 2/3 × 2,000,000 = 1,666,666.67 → 1,666,667, rounded once (part by
    // part it would be 333,333 + 1,333,333 = 1,666,666).
    expect(by.machine_memory_gb_seconds).toMatchObject({
      amountMicros: '-1666667',
      detail:
        'machine_memory_gb_seconds: ≈0.333333333 gb-second × 1000000 micro-cents + ≈0.666666667 gb-second × 2000000 micro-cents',
    });
    const balance = String(100_000_000 - 1440 - 1_666_667);
    expect((await req(org, 'GET', '/v1/billing/credits')).body.balanceMicros).toBe(balance);
    await expectLedgerSumsToBalance(tp, org.token);

    // The preview prices it with the same function.
    const preview = await req(
      org,
      'GET',
      `/v1/billing/preview?from=${at(0).toISOString()}&to=${at(60).toISOString()}`,
    );
    const lines = Object.fromEntries(preview.body.lines.map((l: { kind: string }) => [l.kind, l]));
    expect(lines[run]).toMatchObject({ quantity: 180, priceMicros: 9, amountMicros: '1440' });
    expect(lines.machine_memory_gb_seconds).toMatchObject({ quantity: 1, amountMicros: '1666667' });

    // Replayed from a cursor set back: the same figures, nothing booked twice.
    await db
      .updateTable('billing_cursor')
      .set({ booked_until: at(0) })
      .execute();
    await bookDue(tp.platform.ctx);
    expect(await usageEntries(org)).toHaveLength(2);
    expect((await req(org, 'GET', '/v1/billing/credits')).body.balanceMicros).toBe(balance);
  });

  it('prices a volume’s tick across a list decided in it, as the meter recorded it', async () => {
    const org = await tp.createOrg({ grantCents: 100 });
    const db = tp.platform.ctx.db;
    const vol = await req(org, 'POST', '/v1/volumes', { name: 'straddle', sizeGb: 3 });
    expect(vol.status, JSON.stringify(vol.body)).toBe(201);
    const decide = async (price: number) => {
      const res = await tp.admin('PUT', '/admin/v1/prices', {
        prices: { volume_storage_gb_hours: price },
      });
      expect(res.status).toBe(200);
      return new Date(res.body.decidedAt).getTime() * 1000;
    };
    const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
    // A cent, then two cents, per GB-second.
    const a = 3_600_000_000;
    const b = 7_200_000_000;
    const aAt = await decide(a);
    await meterStorage(db);
    const from = new Date();
    await sleep(300);
    const bAt = await decide(b);
    await sleep(300);
    await meterStorage(db);
    const to = new Date(Date.now() + 1);

    // The events of the volume since the first tick, each with the interval it measures
    // (microseconds); each begins where the one before it ended.
    const { rows } = await sql<{ quantity: string; since: string; at: string }>`
      SELECT quantity::text, (extract(epoch FROM since) * 1000000)::bigint::text AS since,
        (extract(epoch FROM at) * 1000000)::bigint::text AS at
      FROM usage_events WHERE subject = ${vol.body.id} ORDER BY at`.execute(db);
    expect(rows.length).toBeGreaterThanOrEqual(2);
    for (let i = 1; i < rows.length; i++) expect(rows[i]!.since).toBe(rows[i - 1]!.at);
    const priced = rows.filter((r) => Number(r.at) >= from.getTime() * 1000);
    expect(Number(priced[0]!.since)).toBeLessThan(bAt); // the list was decided inside a tick
    // Each event's quantity shared by time: before the second list at a, after it at b.
    const expected = priced.reduce((sum, r) => {
      const [s, t] = [Number(r.since), Number(r.at)];
      const under = (lo: number, hi: number) => Math.max(0, Math.min(t, hi) - Math.max(s, lo));
      const share = (under(aAt, bAt) * a + under(bAt, Infinity) * b) / (t - s);
      return sum + Number(r.quantity) * share;
    }, 0);
    const preview = await req(
      org,
      'GET',
      `/v1/billing/preview?from=${from.toISOString()}&to=${to.toISOString()}`,
    );
    const line = preview.body.lines.find(
      (l: { kind: string }) => l.kind === 'volume_storage_gb_hours',
    );
    // Rounded once per window (the period may cross an hour): within a micro-cent or two.
    expect(Math.abs(Number(line.amountMicros) - expected)).toBeLessThanOrEqual(2);
    // Priced by when it was recorded, the whole tick would have been at b.
    const atRecording = priced.reduce((sum, r) => sum + Number(r.quantity) * b, 0);
    expect(atRecording - Number(line.amountMicros)).toBeGreaterThan(1000);
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
