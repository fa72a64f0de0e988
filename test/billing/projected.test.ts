/**
 * Blocking at the projected balance (docs/billing.md "Blocking at zero"), with the
 * default window of an hour: the balance booked minus the usage recorded and not booked
 * yet. Two replicas on one store that look at the same zero block it once (one block
 * moment, one stop job); a credit opens the account only when it leaves the projection
 * above zero; and nobody but the operator or a payment moves the money: not a read-only
 * key, not another organization.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { actOnProjectedBalances } from '../../src/services/billing/projected.js';
import { recordUsage } from '../../src/services/billing/record.js';
import { STOP_BLOCKED_JOB } from '../../src/services/billing/stop-blocked.js';
import { startTestPlatform, type TestOrg, type TestPlatform } from '../helpers/platform.js';

let a: TestPlatform;
let b: TestPlatform;
let bDir: string;
let org: TestOrg;
let reader: string;

beforeAll(async () => {
  a = await startTestPlatform();
  bDir = await mkdtemp(path.join(os.tmpdir(), 'pier-test-'));
  b = await startTestPlatform({}, {}, { db: a.db, dataDir: bDir });
  expect(a.platform.ctx.config.billingWindowSeconds).toBe(3600);
  // A cent per running second, from now on.
  const prices = { prices: { machine_running_seconds: 1_000_000 } };
  expect((await a.admin('PUT', '/admin/v1/prices', prices)).status).toBe(200);
  org = await a.createOrg({ grantCents: 2 });
  const res = await a.request('POST', '/v1/tokens', {
    token: org.token,
    body: { name: 'reader', scopes: ['read'] },
  });
  reader = res.body.token;
}, 60_000);

afterAll(async () => {
  await b?.platform.close();
  if (bDir) await rm(bDir, { recursive: true, force: true });
  await a?.close();
});

const credits = async (who: TestOrg = org) =>
  (await a.request('GET', '/v1/billing/credits', { token: who.token })).body;
const run = (seconds: string) =>
  recordUsage(a.platform.ctx.db, [
    { orgId: org.id, kind: 'machine_running_seconds', quantity: seconds },
  ]);
const bothReplicas = async () =>
  (
    await Promise.all([
      actOnProjectedBalances(a.platform.ctx),
      actOnProjectedBalances(b.platform.ctx),
      actOnProjectedBalances(a.platform.ctx),
      actOnProjectedBalances(b.platform.ctx),
    ])
  ).flatMap((acted) => acted.blocked);

async function stopJobs(): Promise<number> {
  const rows = await a.platform.ctx.db
    .selectFrom('jobs')
    .select('payload')
    .where('kind', '=', STOP_BLOCKED_JOB)
    .execute();
  return rows.filter((r) => (r.payload as { orgId?: string }).orgId === org.id).length;
}

describe('the projected balance', () => {
  it('blocks once, on two replicas at once, when unbooked usage takes it to zero', async () => {
    await run('1.5');
    expect(await bothReplicas()).toEqual([]);
    expect((await credits()).blocked).toBe(false);

    // 2 cents − 2.5 cents recorded: below zero, though nothing is booked (the window is
    // an hour and still open).
    await run('1');
    const blocked = await bothReplicas();
    // Blocked by one of these calls (or by a replica's own metering tick just before).
    expect(blocked.length).toBeLessThanOrEqual(1);
    const account = await credits();
    expect(account).toMatchObject({ blocked: true, balanceMicros: '2000000' });
    expect(await stopJobs()).toBe(1);

    // Looked at again: nothing moves, nothing more is enqueued.
    expect(await bothReplicas()).toEqual([]);
    expect((await credits()).blockedAt).toBe(account.blockedAt);
    expect(await stopJobs()).toBe(1);

    const write = await a.request('POST', '/v1/apps', { token: org.token, body: { name: 'pb' } });
    expect([write.status, write.body.code]).toEqual([402, 'credit-blocked']);
  });

  it('is opened only by a credit that leaves the projected balance above zero', async () => {
    await run('1'); // 3.5 cents recorded, 2 booked: projected −1.5 cents.
    const grant = (amountCents: number) =>
      a.admin('POST', `/admin/v1/orgs/${org.id}/grants`, { amountCents });
    // 3 cents booked, −0.5 projected: the booked balance alone would have opened it.
    expect((await grant(1)).status).toBe(201);
    expect(await credits()).toMatchObject({ balanceMicros: '3000000', blocked: true });
    // 4 cents booked, +0.5 projected: open, on every replica, and the check leaves it so.
    expect((await grant(1)).status).toBe(201);
    expect(await credits()).toMatchObject({ blocked: false, blockedAt: null });
    expect(await bothReplicas()).toEqual([]);
    const write = await b.request('POST', '/v1/apps', { token: org.token, body: { name: 'pb' } });
    expect(write.status).toBe(201);
  });

  it('moves no money for a read-only key or another organization', async () => {
    await run('1'); // projected −0.5 cent: blocked again
    expect((await bothReplicas()).length).toBeLessThanOrEqual(1);
    const before = await credits();
    expect(before.blocked).toBe(true);
    const other = await a.createOrg({ grantCents: 1000 });

    const grant = `/admin/v1/orgs/${org.id}/grants`;
    const rule = { enabled: true, thresholdCents: 100, amountCents: 500, capCents: 5000 };
    const asOrg = { 'x-platform-org': org.id };
    const attempts: [string, string, string, unknown, Record<string, string>?, string?][] = [
      // The operator's grant route takes the operator's token only.
      [org.token, 'POST', grant, { amountCents: 100 }, {}, 'unauthenticated'],
      [reader, 'POST', grant, { amountCents: 100 }, {}, 'unauthenticated'],
      [other.token, 'POST', grant, { amountCents: 100 }, {}, 'unauthenticated'],
      // Another organization acting as this one (it does not manage it).
      [
        other.token,
        'POST',
        '/v1/billing/topups',
        { amountCents: 500 },
        asOrg,
        'delegation-refused',
      ],
      [other.token, 'PUT', '/v1/billing/auto-recharge', rule, asOrg, 'delegation-refused'],
      [other.token, 'GET', '/v1/billing/credits', undefined, asOrg, 'delegation-refused'],
      [other.token, 'GET', '/v1/billing/ledger', undefined, asOrg, 'delegation-refused'],
      // The blocked organization's read-only key: no top-up, no rule.
      [reader, 'POST', '/v1/billing/topups', { amountCents: 500 }, {}, 'token-scope'],
      [reader, 'PUT', '/v1/billing/auto-recharge', rule, {}, 'token-scope'],
      // Its plain key: top-ups and rules are for the console's admins.
      [org.token, 'POST', '/v1/billing/topups', { amountCents: 500 }, {}, 'billing-console-only'],
    ];
    for (const [token, method, p, body, headers, code] of attempts) {
      const res = await a.request(method, p, { token, body, headers });
      expect(res.body.code, `${method} ${p}`).toBe(code);
      expect([401, 403], `${method} ${p}`).toContain(res.status);
    }
    // Nothing moved: the same balance, still blocked, no entry added.
    expect(await credits()).toMatchObject({
      balanceMicros: before.balanceMicros,
      blocked: true,
      blockedAt: before.blockedAt,
    });
    const ledger = await a.request('GET', '/v1/billing/ledger?limit=500', { token: org.token });
    expect(ledger.body.entries.map((e: { kind: string }) => e.kind).sort()).toEqual([
      'grant',
      'grant',
      'grant',
    ]);
  });
});
