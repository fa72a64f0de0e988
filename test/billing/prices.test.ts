/**
 * The operator's price list (CONTRACT 2 `PUT /admin/v1/prices`) and what follows it: the
 * credit account's `priced`, and the preview's `pricesDecided`, `pricedFrom` and
 * `unpricedReason` (spec 2.9).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { USAGE_KIND_NAMES } from '../../src/contracts/usage-kinds.js';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.js';

let tp: TestPlatform;

beforeAll(async () => {
  tp = await startTestPlatform();
});
afterAll(async () => tp?.close());

const period = (fromMs: number, toMs: number) =>
  `from=${new Date(fromMs).toISOString()}&to=${new Date(toMs).toISOString()}`;

describe('before any price list', () => {
  it('answers pricesDecided false, and the usage kinds with their units', async () => {
    const res = await tp.admin('GET', '/admin/v1/prices');
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ prices: {}, pricesDecided: false, decidedAt: null });
    expect(res.body.kinds.map((k: { kind: string }) => k.kind)).toEqual(USAGE_KIND_NAMES);
    expect(res.body.kinds[0]).toMatchObject({ kind: 'machine_running_seconds', unit: 'second' });
  });

  it('previews usage unpriced with no-price-list, one line per usage kind', async () => {
    const org = await tp.createOrg({ grantCents: 100 });
    const res = await tp.request('GET', `/v1/billing/preview?${period(0, Date.now())}`, {
      token: org.token,
    });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toMatchObject({
      orgId: org.id,
      currency: 'EUR',
      pricesDecided: false,
      unpricedReason: 'no-price-list',
    });
    expect(res.body.total).toBeUndefined();
    expect(res.body.pricedFrom).toBeUndefined();
    expect(res.body.lines.map((l: { kind: string }) => l.kind)).toEqual(USAGE_KIND_NAMES);
    for (const line of res.body.lines) expect(line).toMatchObject({ quantity: 0, priced: false });
    const credits = await tp.request('GET', '/v1/billing/credits', { token: org.token });
    expect(credits.body.priced).toEqual([]);
  });
});

describe('PUT /admin/v1/prices', () => {
  it('is for the operator only', async () => {
    const org = await tp.createOrg();
    const body = { prices: { machine_running_seconds: 1 } };
    for (const token of [undefined, org.token, 'not-the-operator-token']) {
      const res = await tp.request('PUT', '/admin/v1/prices', { token, body });
      expect(res.status).toBe(401);
      expect(res.body.code).toBe('unauthenticated');
    }
    expect((await tp.admin('GET', '/admin/v1/prices')).body.pricesDecided).toBe(false);
  });

  it('reports every problem at once: unknown kinds, fractions, negatives, strings', async () => {
    const res = await tp.admin('PUT', '/admin/v1/prices', {
      prices: {
        machine_running_seconds: -1,
        volume_storage_gb_hours: 1.5,
        bucket_storage_gb_hours: '3',
        egress_gb: 5,
        machine_vcpu_seconds: 10,
      },
      extra: true,
    });
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('bad-request');
    expect(res.body.issues.map((i: { path: string }) => i.path).sort()).toEqual(
      [
        'extra',
        'prices.bucket_storage_gb_hours',
        'prices.egress_gb',
        'prices.machine_running_seconds',
        'prices.volume_storage_gb_hours',
      ].sort(),
    );
    const missing = await tp.admin('PUT', '/admin/v1/prices', {});
    expect(missing.status).toBe(400);
    expect(missing.body.issues).toEqual([{ path: 'prices', message: 'is required' }]);
    expect((await tp.admin('GET', '/admin/v1/prices')).body.pricesDecided).toBe(false);
  });

  it('stores the list, answers it with pricesDecided, and the accounts show what is priced', async () => {
    const before = Date.now();
    const res = await tp.admin('PUT', '/admin/v1/prices', {
      prices: {
        machine_running_seconds: 77,
        volume_storage_gb_hours: 20_500,
        bucket_storage_gb_hours: 0,
      },
    });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toMatchObject({
      prices: {
        machine_running_seconds: 77,
        volume_storage_gb_hours: 20_500,
        bucket_storage_gb_hours: 0,
      },
      pricesDecided: true,
    });
    expect(new Date(res.body.decidedAt).getTime()).toBeGreaterThanOrEqual(before - 1000);
    expect((await tp.admin('GET', '/admin/v1/prices')).body).toEqual(res.body);

    const org = await tp.createOrg();
    const credits = await tp.request('GET', '/v1/billing/credits', { token: org.token });
    expect(credits.body.priced).toEqual([
      'bucket_storage_gb_hours',
      'machine_running_seconds',
      'volume_storage_gb_hours',
    ]);

    // A new list replaces the old one whole: a kind left out carries no price any more.
    const next = await tp.admin('PUT', '/admin/v1/prices', {
      prices: { machine_running_seconds: 80 },
    });
    expect(next.body.prices).toEqual({ machine_running_seconds: 80 });
    const after = await tp.request('GET', '/v1/billing/credits', { token: org.token });
    expect(after.body.priced).toEqual(['machine_running_seconds']);
  });
});

describe('GET /v1/billing/preview after a price list', () => {
  it('tells pricedFrom (the moment of the first list) and prices lines of priced kinds', async () => {
    const opened = Date.now();
    const org = await tp.createOrg({ grantCents: 5 });
    // The first list decided (this file decides several).
    const first = await tp.platform.ctx.db
      .selectFrom('price_lists')
      .select('decided_at')
      .orderBy('decided_at')
      .executeTakeFirstOrThrow();
    const decided = first.decided_at;
    const hour = 3600_000;
    const res = await tp.request(
      'GET',
      `/v1/billing/preview?${period(Date.now(), Date.now() + 2 * hour)}`,
      { token: org.token },
    );
    expect(res.status).toBe(200);
    expect(res.body.pricesDecided).toBe(true);
    // Prices apply from the moment of the decision, not from the next window (an hour by
    // default); usage of an account starts to count in the window it opened.
    const accountWindow = Math.floor(opened / hour) * hour;
    expect(res.body.pricedFrom).toBe(
      new Date(Math.max(decided.getTime(), accountWindow)).toISOString(),
    );
    expect(res.body.unpricedReason).toBeUndefined();
    expect(res.body.total).toBe(0);
    expect(res.body.totalMicros).toBe('0');
    const line = res.body.lines.find((l: { kind: string }) => l.kind === 'machine_running_seconds');
    expect(line).toMatchObject({
      priced: true,
      priceMicros: 80,
      quantity: 0,
      amount: 0,
      amountMicros: '0',
    });
    const other = res.body.lines.find(
      (l: { kind: string }) => l.kind === 'volume_storage_gb_hours',
    );
    expect(other).toEqual({
      kind: 'volume_storage_gb_hours',
      unit: 'gb-hour',
      quantity: 0,
      priced: false,
    });
  });

  it('answers before-credit for a period before usage is priced', async () => {
    const org = await tp.createOrg();
    const res = await tp.request('GET', `/v1/billing/preview?${period(0, 3600_000)}`, {
      token: org.token,
    });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ pricesDecided: true, unpricedReason: 'before-credit' });
    expect(res.body.total).toBeUndefined();
  });

  it('answers no-credit-account for an organization that is not prepaid', async () => {
    const org = await tp.createOrg({ prepaid: false });
    const res = await tp.request('GET', `/v1/billing/preview?${period(0, Date.now())}`, {
      token: org.token,
    });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ pricesDecided: true, unpricedReason: 'no-credit-account' });
    expect(res.body.pricedFrom).toBeUndefined();
  });

  it('validates from and to, all problems at once, and needs a full-access key', async () => {
    const org = await tp.createOrg();
    const bad = await tp.request('GET', '/v1/billing/preview?from=yesterday', { token: org.token });
    expect(bad.status).toBe(400);
    expect(bad.body.issues.map((i: { path: string }) => i.path).sort()).toEqual(['from', 'to']);
    const reversed = await tp.request('GET', `/v1/billing/preview?${period(2000, 1000)}`, {
      token: org.token,
    });
    expect(reversed.status).toBe(400);
    const read = await tp.request('POST', '/v1/tokens', {
      token: org.token,
      body: { name: 'reader', scopes: ['read'] },
    });
    const scoped = await tp.request('GET', `/v1/billing/preview?${period(0, 1000)}`, {
      token: read.body.token,
    });
    expect(scoped.status).toBe(403);
    expect(scoped.body.code).toBe('token-scope');
  });
});
