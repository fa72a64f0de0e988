/**
 * Booking usage into the ledger (docs/billing.md), on one-second windows: exact integer
 * micro-cents from usage recorded by pier's own recording function, the preview equal to
 * the booking, one entry per window and kind whatever runs twice (two platforms on one
 * store, a cursor set back), catching up after downtime, and blocking at zero with its
 * 402 `credit-blocked`, lifted by a grant.
 */
import { spawn } from 'node:child_process';
import { sql } from 'kysely';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bookDue } from '../../src/services/billing/booking.js';
import { actOnProjectedBalances } from '../../src/services/billing/projected.js';
import { recordUsage, type UsageRecord } from '../../src/services/billing/record.js';
import { openStore } from '../../src/store/db.js';
import { startTestPlatform, type TestOrg, type TestPlatform } from '../helpers/platform.js';

const WINDOW_MS = 1000;
const config = { billingWindowSeconds: 1 };
let tp: TestPlatform;

const PRICES = {
  machine_running_seconds: 7,
  machine_memory_gb_seconds: 3,
  volume_storage_gb_hours: 20_500,
};

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** Until the window holding now has closed (and a little more). */
const nextWindow = () => sleep(WINDOW_MS - (Date.now() % WINDOW_MS) + 30);

beforeAll(async () => {
  tp = await startTestPlatform(config);
  expect((await tp.admin('PUT', '/admin/v1/prices', { prices: PRICES })).status).toBe(200);
  // Prices apply from the next window on.
  await nextWindow();
});
afterAll(async () => tp?.close());

/** Records usage now, not in the last 200 ms of a window (so that all of it is in one). */
async function record(org: TestOrg, rows: Omit<UsageRecord, 'orgId'>[]) {
  if (Date.now() % WINDOW_MS > WINDOW_MS - 200) await nextWindow();
  await recordUsage(
    tp.platform.ctx.db,
    rows.map((r) => ({ ...r, orgId: org.id })),
  );
}

interface Entry {
  kind: string;
  amountMicros: string;
  reference: string;
  windowFrom: string;
  windowTo: string;
  detail: string;
}

async function usageEntries(org: TestOrg): Promise<Entry[]> {
  const res = await tp.request('GET', '/v1/billing/ledger?limit=500', { token: org.token });
  expect(res.status).toBe(200);
  return res.body.entries.filter((e: Entry) => e.kind === 'usage');
}

async function credits(org: TestOrg) {
  return (await tp.request('GET', '/v1/billing/credits', { token: org.token })).body;
}

/** Records, waits for the window to close, books. */
async function recordAndBook(org: TestOrg, rows: Omit<UsageRecord, 'orgId'>[]) {
  await record(org, rows);
  await nextWindow();
  await bookDue(tp.platform.ctx);
}

describe('booking', () => {
  it('books recorded usage exactly, one entry per window and kind, the balance with it', async () => {
    const org = await tp.createOrg({ grantCents: 100 });
    await recordAndBook(org, [
      { kind: 'machine_running_seconds', quantity: '12.345' }, // × 7 = 86.415 → 86
      { kind: 'machine_memory_gb_seconds', quantity: '0.5' }, // × 3 = 1.5 → 2 (half up)
      { kind: 'machine_vcpu_seconds', quantity: '99' }, // no price: not booked
    ]);
    const entries = await usageEntries(org);
    const by = Object.fromEntries(entries.map((e) => [e.reference, e]));
    expect(Object.keys(by).sort()).toEqual([
      'machine_memory_gb_seconds',
      'machine_running_seconds',
    ]);
    expect(by.machine_running_seconds!.amountMicros).toBe('-86');
    expect(by.machine_memory_gb_seconds!.amountMicros).toBe('-2');
    const e = by.machine_running_seconds!;
    expect(new Date(e.windowTo).getTime() - new Date(e.windowFrom).getTime()).toBe(WINDOW_MS);
    expect(new Date(e.windowFrom).getTime() % WINDOW_MS).toBe(0);
    expect(e.detail).toContain('12.345 second × 7 micro-cents');

    const account = await credits(org);
    expect(account.balanceMicros).toBe(String(100_000_000 - 88));
    expect(account.balanceCents).toBe(99);
    expect(account.blocked).toBe(false);
    const all = (await tp.request('GET', '/v1/billing/ledger?limit=500', { token: org.token })).body
      .entries as Entry[];
    expect(all.reduce((n, x) => n + BigInt(x.amountMicros), 0n).toString()).toBe(
      account.balanceMicros,
    );

    // The preview of the booked window prices it with the same function: the same amounts.
    const preview = await tp.request(
      'GET',
      `/v1/billing/preview?from=${e.windowFrom}&to=${e.windowTo}`,
      { token: org.token },
    );
    expect(preview.status).toBe(200);
    const lines = Object.fromEntries(preview.body.lines.map((l: { kind: string }) => [l.kind, l]));
    expect(lines.machine_running_seconds).toMatchObject({
      quantity: 12.345,
      priced: true,
      priceMicros: 7,
      amountMicros: '86',
      amount: 0.000086,
    });
    expect(lines.machine_memory_gb_seconds).toMatchObject({ amountMicros: '2' });
    expect(lines.machine_vcpu_seconds).toMatchObject({ quantity: 99, priced: false });
    expect(preview.body.totalMicros).toBe('88');
    expect(preview.body.total).toBe(0.000088);

    // A longer period holds the same usage: the same total.
    const wide = await tp.request(
      'GET',
      `/v1/billing/preview?from=${new Date(Date.now() - 60_000).toISOString()}&to=${new Date().toISOString()}`,
      { token: org.token },
    );
    expect(wide.body.totalMicros).toBe('88');
  });

  it('books usage of several windows into entries of their own windows', async () => {
    const org = await tp.createOrg({ grantCents: 10 });
    await record(org, [{ kind: 'machine_running_seconds', quantity: 1 }]);
    await nextWindow();
    await record(org, [{ kind: 'machine_running_seconds', quantity: 2 }]);
    await nextWindow();
    await bookDue(tp.platform.ctx);
    const entries = await usageEntries(org);
    expect(entries.map((e) => e.amountMicros).sort()).toEqual(['-14', '-7']);
    expect(new Set(entries.map((e) => e.windowFrom)).size).toBe(2);
  });

  it('never books a window twice: two platforms at once on one store, and a cursor set back', async () => {
    const org = await tp.createOrg({ grantCents: 10 });
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'pier-test-'));
    const second = await startTestPlatform(config, {}, { db: tp.db, dataDir });
    try {
      for (let i = 0; i < 3; i++) {
        await record(org, [
          { kind: 'machine_running_seconds', quantity: 10 },
          { kind: 'volume_storage_gb_hours', quantity: '0.25' },
        ]);
        await nextWindow();
      }
      await Promise.all([
        bookDue(tp.platform.ctx),
        bookDue(second.platform.ctx),
        bookDue(tp.platform.ctx),
        bookDue(second.platform.ctx),
      ]);
    } finally {
      await second.platform.close();
      await rm(dataDir, { recursive: true, force: true });
    }
    const entries = await usageEntries(org);
    // Three windows, two kinds: 70 and 5125 micro-cents each.
    expect(entries).toHaveLength(6);
    const keys = new Set(entries.map((e) => `${e.windowFrom} ${e.reference}`));
    expect(keys.size).toBe(6);
    const expected = 10_000_000n - 3n * (70n + 5125n);
    expect((await credits(org)).balanceMicros).toBe(expected.toString());

    // A booker whose cursor is wrong (set back an hour) books nothing again.
    await tp.platform.ctx.db
      .updateTable('billing_cursor')
      .set({ booked_until: new Date(Date.now() - 3600_000) })
      .execute();
    await bookDue(tp.platform.ctx);
    expect(await usageEntries(org)).toHaveLength(6);
    expect((await credits(org)).balanceMicros).toBe(expected.toString());
  });

  it('catches up after downtime and a booker killed mid-window: every window booked once', async () => {
    const org = await tp.createOrg({ grantCents: 10 });
    const reuse = { db: tp.db, dataDir: tp.dataDir };
    await tp.platform.close();
    // Usage recorded while no pier runs (as another replica, or a meter before a crash).
    const store = openStore(tp.db.url);
    try {
      for (const quantity of [1, 2, 3]) {
        await recordUsage(store.db, [{ orgId: org.id, kind: 'machine_running_seconds', quantity }]);
        await nextWindow();
      }
      // A booker is killed in the middle of the first window: its entry was written, its
      // transaction waits on the balance (held here), and the process dies.
      const hold = await store.pool.connect();
      await hold.query('BEGIN');
      await hold.query('SELECT 1 FROM credit_accounts WHERE org_id = $1 FOR UPDATE', [org.id]);
      const child = spawn(
        process.execPath,
        ['--import', 'tsx', 'test/billing/booker-process.ts', tp.db.url, '1'],
        { stdio: ['ignore', 'pipe', 'inherit'] },
      );
      try {
        const waiting = async () =>
          (
            await store.pool.query(
              `SELECT count(*)::int AS n FROM pg_stat_activity
               WHERE datname = current_database() AND wait_event_type = 'Lock'
                 AND query LIKE '%credit_accounts%'`,
            )
          ).rows[0].n > 0;
        for (let i = 0; !(await waiting()); i++) {
          if (i > 200) throw new Error('the booker never reached the balance');
          await sleep(50);
        }
        const inFlight = await store.pool.query(
          `SELECT count(*)::int AS n FROM ledger_entries WHERE org_id = $1`,
          [org.id],
        );
        // Not committed: nobody else sees the entry the booker wrote.
        expect(inFlight.rows[0].n).toBe(1); // the org's initial grant only
        child.kill('SIGKILL');
        await new Promise((r) => child.once('exit', r));
      } finally {
        child.kill('SIGKILL');
        await hold.query('ROLLBACK');
        hold.release();
      }
    } finally {
      await store.close();
    }
    const restarted = await startTestPlatform(config, {}, reuse);
    tp.platform = restarted.platform;
    tp.url = restarted.url;
    tp.request = restarted.request;
    tp.admin = restarted.admin;
    tp.createOrg = restarted.createOrg;
    const closeFirst = tp.close;
    tp.close = async () => {
      await restarted.platform.close();
      await closeFirst();
    };
    await bookDue(tp.platform.ctx);
    const entries = await usageEntries(org);
    expect(entries.map((e) => e.amountMicros).sort()).toEqual(['-14', '-21', '-7']);
    expect(new Set(entries.map((e) => e.windowFrom)).size).toBe(3);
    expect((await credits(org)).balanceMicros).toBe(String(10_000_000 - 42));
    // The cursor stands at the open window: nothing closed is left behind.
    const cursor = await tp.platform.ctx.db
      .selectFrom('billing_cursor')
      .select('booked_until')
      .executeTakeFirstOrThrow();
    expect(Date.now() - cursor.booked_until.getTime()).toBeLessThan(3 * WINDOW_MS);
  });
});

describe('blocking at zero', () => {
  let manager: TestOrg;
  let poor: TestOrg;
  let bystander: TestOrg;
  let reader: string;

  beforeAll(async () => {
    manager = await tp.createOrg({ grantCents: 1 });
    poor = await tp.createOrg({ grantCents: 1, managedBy: manager.id });
    bystander = await tp.createOrg({ grantCents: 1 });
    const res = await tp.request('POST', '/v1/tokens', {
      token: poor.token,
      body: { name: 'reader', scopes: ['read'] },
    });
    reader = res.body.token;
    expect(
      (await tp.request('POST', '/v1/apps', { token: poor.token, body: { name: 'poor-app' } }))
        .status,
    ).toBe(201);
    // 200,000 seconds × 7 = 1.4 cents: more than the 1 cent granted.
    await recordAndBook(poor, [{ kind: 'machine_running_seconds', quantity: 200_000 }]);
  });

  it('blocks the account when booking takes the balance to zero or below, and warns', async () => {
    const account = await credits(poor);
    expect(account).toMatchObject({
      balanceMicros: '-400000',
      balanceCents: -1,
      blocked: true,
      warned: true,
    });
    expect(new Date(account.blockedAt).getTime()).toBeGreaterThan(Date.now() - 60_000);
    expect((await credits(bystander)).blocked).toBe(false);
  });

  it('answers writes with 402 credit-blocked; reads, stops and billing pass', async () => {
    const as = (method: string, p: string, body?: unknown, token = poor.token) =>
      tp.request(method, p, { token, body });
    for (const [method, p, body] of [
      ['POST', '/v1/apps', { name: 'another-app' }],
      ['POST', '/v1/apps/poor-app/machines', { image: 'busybox' }],
      ['PUT', '/v1/apps/poor-app/secrets', { secrets: { A: '1' } }],
      ['POST', '/v1/tokens', { name: 'more' }],
      ['POST', '/v1/volumes', { name: 'poor-vol', sizeGb: 1 }],
      ['DELETE', '/v1/apps/poor-app', undefined],
      ['POST', '/v1/machines/mach_missing/start', undefined],
    ] as const) {
      const res = await as(method, p, body);
      expect(res.status, `${method} ${p}`).toBe(402);
      expect(res.body.code).toBe('credit-blocked');
      expect(res.body.error).toMatch(/credit/i);
    }
    // Reads stay open, billing too.
    expect((await as('GET', '/v1/apps')).status).toBe(200);
    expect((await as('GET', '/v1/apps/poor-app')).status).toBe(200);
    expect((await as('GET', '/v1/billing/ledger')).status).toBe(200);
    expect((await as('GET', '/v1/usage')).status).toBe(200);
    // A stop passes the check (the machine is missing: 404, not 402).
    for (const action of ['stop', 'suspend']) {
      const stop = await as('POST', `/v1/machines/mach_missing/${action}`);
      expect(stop.status, action).toBe(404);
    }
    // A read-scoped key is refused for its scope first, and reads as before.
    expect((await as('POST', '/v1/apps', { name: 'x-app' }, reader)).status).toBe(403);
    expect((await as('GET', '/v1/apps', undefined, reader)).status).toBe(200);
    // Revoking a key passes (it takes access away).
    const keys = await as('GET', '/v1/tokens');
    const readerKey = keys.body.find((k: { name: string }) => k.name === 'reader');
    expect((await as('DELETE', `/v1/tokens/${readerKey.id}`)).status).toBe(204);
  });

  it('answers 402 to a manager acting as the blocked organization, not acting as itself', async () => {
    const as = (org?: string) =>
      tp.request('POST', '/v1/apps', {
        token: manager.token,
        headers: org ? { 'x-platform-org': org } : {},
        body: { name: `mgr-${org ? 'as' : 'own'}` },
      });
    const delegated = await as(poor.id);
    expect(delegated.status).toBe(402);
    expect(delegated.body.code).toBe('credit-blocked');
    expect((await as()).status).toBe(201);
  });

  it('leaves other organizations and the operator API alone', async () => {
    const res = await tp.request('POST', '/v1/apps', {
      token: bystander.token,
      body: { name: 'bystander-app' },
    });
    expect(res.status).toBe(201);
    const user = await tp.admin('POST', `/admin/v1/orgs/${poor.id}/users`, {
      email: 'someone@poor.example',
    });
    expect(user.status).toBe(201);
  });

  it('unblocks in the transaction of a grant that lifts the balance above zero', async () => {
    const small = await tp.admin('POST', `/admin/v1/orgs/${poor.id}/grants`, { amountCents: 1 });
    expect(small.status).toBe(201);
    // -0.4 + 1 cent = 0.6 cent: above zero, open at once.
    const account = await credits(poor);
    expect(account).toMatchObject({ balanceMicros: '600000', blocked: false, blockedAt: null });
    const res = await tp.request('POST', '/v1/apps', {
      token: poor.token,
      body: { name: 'poor-again' },
    });
    expect(res.status).toBe(201);
  });

  it('keeps a block of the projected balance when booking leaves the balance above zero', async () => {
    const org = await tp.createOrg({ grantCents: 1 });
    // 0.7 cent now, and 0.7 in a window that stays open while this test runs (stamped
    // an hour ahead, so that no booking here can close it): 1.4 cents of 1.
    await record(org, [{ kind: 'machine_running_seconds', quantity: 100_000 }]);
    await sql`INSERT INTO usage_events (org_id, kind, quantity, at)
      VALUES (${org.id}, 'machine_running_seconds', 100000, now() + interval '1 hour')`.execute(
      tp.platform.ctx.db,
    );
    expect((await actOnProjectedBalances(tp.platform.ctx)).blocked).toContain(org.id);
    const blocked = await credits(org);
    expect(blocked.blocked).toBe(true);
    // The first window booked (its debit leaves 0.3 cent booked): still blocked, and
    // blocked since the same moment.
    await nextWindow();
    await bookDue(tp.platform.ctx);
    const after = await credits(org);
    expect(after).toMatchObject({ blocked: true, blockedAt: blocked.blockedAt });
    expect(BigInt(after.balanceMicros)).toBeGreaterThan(0n);
  });

  it('never blocks an organization that is not prepaid, nor books its usage', async () => {
    const free = await tp.createOrg({ prepaid: false });
    await recordAndBook(free, [{ kind: 'machine_running_seconds', quantity: 1_000_000 }]);
    const res = await tp.request('POST', '/v1/apps', {
      token: free.token,
      body: { name: 'free-app' },
    });
    expect(res.status).toBe(201);
    const n = await tp.platform.ctx.db
      .selectFrom('ledger_entries')
      .select((eb) => eb.fn.countAll().as('n'))
      .where('org_id', '=', free.id)
      .executeTakeFirstOrThrow();
    expect(Number(n.n)).toBe(0);
  });
});
