import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, type TestOrg, type TestPlatform } from '../helpers/platform.js';

let tp: TestPlatform;
/** The platform's clock runs this far ahead; bumped so that entries get distinct times. */
let offsetMs = 0;

beforeAll(async () => {
  tp = await startTestPlatform({}, { clock: () => new Date(Date.now() + offsetMs) });
});
afterAll(async () => tp?.close());

async function grant(org: TestOrg, amountCents: number, reason?: string) {
  offsetMs += 1000;
  const res = await tp.admin('POST', `/admin/v1/orgs/${org.id}/grants`, {
    amountCents,
    ...(reason ? { reason } : {}),
  });
  expect(res.status).toBe(201);
  return res.body;
}

async function newToken(org: TestOrg, body: Record<string, unknown>): Promise<string> {
  const res = await tp.request('POST', '/v1/tokens', { token: org.token, body });
  expect(res.status).toBe(201);
  return res.body.token;
}

describe('GET /v1/billing/credits', () => {
  it('answers the credit account with every field of spec 2.9', async () => {
    const org = await tp.createOrg({ grantCents: 1234 });
    const res = await tp.request('GET', '/v1/billing/credits', { token: org.token });
    expect(res.status).toBe(200);
    expect(Object.keys(res.body).sort()).toEqual(
      [
        'orgId',
        'currency',
        'prepaid',
        'balanceMicros',
        'balanceCents',
        'blocked',
        'blockedAt',
        'warned',
        'warnAtPercent',
        'minTopupCents',
        'priced',
        'autoRecharge',
      ].sort(),
    );
    expect(res.body.orgId).toBe(org.id);
    expect(res.body.currency).toBe('EUR');
    expect(res.body.prepaid).toBe(true);
    expect(res.body.balanceMicros).toBe('1234000000');
    expect(res.body.balanceCents).toBe(1234);
    expect(res.body.blocked).toBe(false);
    expect(res.body.blockedAt).toBeNull();
    expect(res.body.warned).toBe(false);
    expect(Number.isInteger(res.body.warnAtPercent)).toBe(true);
    expect(res.body.warnAtPercent).toBeGreaterThanOrEqual(0);
    expect(res.body.warnAtPercent).toBeLessThanOrEqual(100);
    expect(Number.isInteger(res.body.minTopupCents)).toBe(true);
    expect(res.body.minTopupCents).toBeGreaterThan(0);
    expect(Array.isArray(res.body.priced)).toBe(true);
    for (const kind of res.body.priced) expect(typeof kind).toBe('string');

    const ar = res.body.autoRecharge;
    expect(Object.keys(ar).sort()).toEqual(
      [
        'enabled',
        'thresholdCents',
        'amountCents',
        'capCents',
        'pending',
        'failedAt',
        'hasPaymentMethod',
      ].sort(),
    );
    expect(ar.enabled).toBe(false);
    for (const field of ['thresholdCents', 'amountCents', 'capCents']) {
      expect(Number.isInteger(ar[field])).toBe(true);
      expect(ar[field]).toBeGreaterThanOrEqual(0);
    }
    expect(typeof ar.pending).toBe('boolean');
    expect(ar.failedAt).toBeNull();
    expect(typeof ar.hasPaymentMethod).toBe('boolean');
  });

  it('starts at zero without a grant, and follows later grants exactly', async () => {
    const org = await tp.createOrg();
    const zero = await tp.request('GET', '/v1/billing/credits', { token: org.token });
    expect(zero.status).toBe(200);
    expect(zero.body.balanceMicros).toBe('0');
    expect(zero.body.balanceCents).toBe(0);
    expect(zero.body.blocked).toBe(false);

    await grant(org, 1);
    await grant(org, 99_999);
    const after = await tp.request('GET', '/v1/billing/credits', { token: org.token });
    expect(after.body.balanceMicros).toBe('100000000000');
    expect(after.body.balanceCents).toBe(100_000);
  });

  it('answers 409 not-prepaid for an org without a credit account', async () => {
    const org = await tp.createOrg({ prepaid: false });
    const credits = await tp.request('GET', '/v1/billing/credits', { token: org.token });
    expect(credits.status).toBe(409);
    expect(credits.body.code).toBe('not-prepaid');
    expect(typeof credits.body.error).toBe('string');
    const ledger = await tp.request('GET', '/v1/billing/ledger', { token: org.token });
    expect(ledger.status).toBe(409);
    expect(ledger.body.code).toBe('not-prepaid');
  });

  it('needs a full-access key: a read-scoped key gets 403 token-scope', async () => {
    const org = await tp.createOrg({ grantCents: 10 });
    const read = await newToken(org, { name: 'reader', scopes: ['read'] });
    for (const path of ['/v1/billing/credits', '/v1/billing/ledger']) {
      const res = await tp.request('GET', path, { token: read });
      expect(res.status, path).toBe(403);
      expect(res.body.code, path).toBe('token-scope');
    }
    const none = await tp.request('GET', '/v1/billing/credits');
    expect(none.status).toBe(401);
    expect(none.body.code).toBe('unauthenticated');
  });

  it('may be read by agent tokens of every class', async () => {
    const org = await tp.createOrg({ grantCents: 42 });
    for (const agent of [
      { class: 'sandbox' },
      { class: 'twin' },
      { class: 'production' },
      { class: 'production', prodDataRead: true },
    ]) {
      const token = await newToken(org, { name: `agent ${agent.class}`, agent });
      const credits = await tp.request('GET', '/v1/billing/credits', { token });
      expect(credits.status, agent.class).toBe(200);
      expect(credits.body.balanceCents).toBe(42);
      const ledger = await tp.request('GET', '/v1/billing/ledger', { token });
      expect(ledger.status, agent.class).toBe(200);
      expect(ledger.body.entries).toHaveLength(1);
    }
  });

  it('shows the managed org to its manager under X-Platform-Org', async () => {
    const manager = await tp.createOrg({ grantCents: 1 });
    const managed = await tp.createOrg({ grantCents: 777, managedBy: manager.id });
    const res = await tp.request('GET', '/v1/billing/credits', {
      token: manager.token,
      headers: { 'x-platform-org': managed.id },
    });
    expect(res.status).toBe(200);
    expect(res.body.orgId).toBe(managed.id);
    expect(res.body.balanceCents).toBe(777);
  });
});

describe('GET /v1/billing/ledger', () => {
  let org: TestOrg;
  const amounts = Array.from({ length: 54 }, (_, i) => i + 1);
  const entries: { id: string }[] = [];

  beforeAll(async () => {
    org = await tp.createOrg({ grantCents: 1000 });
    for (const cents of amounts) entries.push(await grant(org, cents, `grant ${cents}`));
  });

  it('answers orgId, currency, limit and at most 50 entries by default, newest first', async () => {
    const res = await tp.request('GET', '/v1/billing/ledger', { token: org.token });
    expect(res.status).toBe(200);
    expect(res.body.orgId).toBe(org.id);
    expect(res.body.currency).toBe('EUR');
    expect(res.body.limit).toBe(50);
    expect(res.body.entries).toHaveLength(50);
    // Newest first: the last grant leads.
    const got = res.body.entries.map((e: { amountCents: number }) => e.amountCents);
    expect(got).toEqual([...amounts].reverse().slice(0, 50));
    const times = res.body.entries.map((e: { at: string }) => new Date(e.at).getTime());
    for (let i = 1; i < times.length; i++) expect(times[i]).toBeLessThanOrEqual(times[i - 1]);
  });

  it('gives every entry the fields of spec 2.9', async () => {
    const res = await tp.request('GET', '/v1/billing/ledger?limit=500', { token: org.token });
    expect(res.status).toBe(200);
    expect(res.body.limit).toBe(500);
    expect(res.body.entries).toHaveLength(amounts.length + 1);
    for (const e of res.body.entries) {
      expect(Object.keys(e).sort()).toEqual(
        [
          'id',
          'kind',
          'amountMicros',
          'amountCents',
          'reference',
          'windowFrom',
          'windowTo',
          'detail',
          'at',
        ].sort(),
      );
      expect(e.kind).toBe('grant');
      expect(e.amountMicros).toMatch(/^-?\d+$/);
      expect(BigInt(e.amountMicros)).toBe(BigInt(e.amountCents) * 1_000_000n);
      expect(new Date(e.at).getTime()).not.toBeNaN();
    }
    const newest = res.body.entries[0];
    expect(newest.id).toBe(entries[entries.length - 1]?.id);
    expect(newest.amountCents).toBe(54);
    expect(newest.amountMicros).toBe('54000000');
    expect(newest.detail).toBe('grant 54');
    // The initial grant of the org is the oldest entry.
    const oldest = res.body.entries[res.body.entries.length - 1];
    expect(oldest.amountMicros).toBe('1000000000');
    expect(oldest.amountCents).toBe(1000);

    const credits = await tp.request('GET', '/v1/billing/credits', { token: org.token });
    const sum = res.body.entries.reduce(
      (acc: bigint, e: { amountMicros: string }) => acc + BigInt(e.amountMicros),
      0n,
    );
    expect(credits.body.balanceMicros).toBe(sum.toString());
  });

  it('takes a limit between 1 and 500', async () => {
    const one = await tp.request('GET', '/v1/billing/ledger?limit=1', { token: org.token });
    expect(one.status).toBe(200);
    expect(one.body.limit).toBe(1);
    expect(one.body.entries).toHaveLength(1);
    expect(one.body.entries[0].amountCents).toBe(54);

    const three = await tp.request('GET', '/v1/billing/ledger?limit=3', { token: org.token });
    expect(three.body.entries.map((e: { amountCents: number }) => e.amountCents)).toEqual([
      54, 53, 52,
    ]);

    for (const bad of ['0', '501', '-1', '2.5', 'ten', '']) {
      const res = await tp.request('GET', `/v1/billing/ledger?limit=${bad}`, { token: org.token });
      expect(res.status, `limit=${bad}`).toBe(400);
      expect(res.body.code).toBe('bad-request');
      expect(res.body.issues.map((i: { path: string }) => i.path)).toEqual(['limit']);
    }
  });

  it('refuses unknown query parameters', async () => {
    const res = await tp.request('GET', '/v1/billing/ledger?kind=grant', { token: org.token });
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('bad-request');
  });

  it("shows only the caller's own entries", async () => {
    const other = await tp.createOrg({ grantCents: 5 });
    const res = await tp.request('GET', '/v1/billing/ledger', { token: other.token });
    expect(res.status).toBe(200);
    expect(res.body.orgId).toBe(other.id);
    expect(res.body.entries).toHaveLength(1);
    expect(res.body.entries[0].amountCents).toBe(5);
    const ids = new Set(entries.map((e) => e.id));
    expect(ids.has(res.body.entries[0].id)).toBe(false);
  });

  it('is empty for a prepaid org that never had an entry', async () => {
    const empty = await tp.createOrg();
    const res = await tp.request('GET', '/v1/billing/ledger', { token: empty.token });
    expect(res.status).toBe(200);
    expect(res.body.entries).toEqual([]);
  });
});
