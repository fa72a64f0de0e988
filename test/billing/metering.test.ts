/**
 * Metering what is kept (services/billing/meter-storage.ts): a volume's provisioned size
 * and a bucket's stored bytes become GB-hours of usage, each tick recording the time since
 * the last one; and on a blocked account a presigned download passes while an upload is
 * refused.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { meterStorage } from '../../src/services/billing/meter-storage.js';
import { recordUsage } from '../../src/services/billing/record.js';
import { bookDue } from '../../src/services/billing/booking.js';
import { startTestPlatform, type TestOrg, type TestPlatform } from '../helpers/platform.js';

let tp: TestPlatform;
let org: TestOrg;
const req = (method: string, p: string, body?: unknown) =>
  tp.request(method, p, { token: org.token, body });

beforeAll(async () => {
  tp = await startTestPlatform({ billingWindowSeconds: 1 });
  org = await tp.createOrg({ grantCents: 1 });
});
afterAll(async () => tp?.close());

interface UsageEvent {
  kind: string;
  quantity: number;
  at: string;
}

async function events(kind: string): Promise<UsageEvent[]> {
  const res = await req('GET', '/v1/usage');
  expect(res.status).toBe(200);
  return res.body.events.filter((e: UsageEvent) => e.kind === kind);
}

describe('storage metering', () => {
  it('records a volume’s size and a bucket’s bytes as GB-hours since the last tick', async () => {
    const vol = await req('POST', '/v1/volumes', { name: 'meter-vol', sizeGb: 3 });
    expect(vol.status, JSON.stringify(vol.body)).toBe(201);
    expect((await req('POST', '/v1/buckets', { name: 'meter-bkt' })).status).toBe(201);
    const put = await req('POST', '/v1/buckets/meter-bkt/presign', { op: 'put', key: 'a.bin' });
    expect(put.status).toBe(200);
    const body = Buffer.alloc(1 << 20, 7);
    expect((await fetch(put.body.url, { method: 'PUT', body })).status).toBe(200);

    // Timed around both ticks: each stamps its time inside its own work, which a busy
    // host can stretch, so the tick-to-tick interval lies within this span, not the sleep.
    const t0 = Date.now();
    await meterStorage(tp.platform.ctx.db);
    await new Promise((r) => setTimeout(r, 500));
    await meterStorage(tp.platform.ctx.db);
    const elapsedS = (Date.now() - t0) / 1000;

    const volume = await events('volume_storage_gb_hours');
    expect(volume.length).toBeGreaterThanOrEqual(2);
    const last = volume.at(-1)!;
    // 3 GB for about half a second: 3 × 0.5 / 3600 GB-hours, within the test's own timing.
    expect(last.quantity).toBeGreaterThan((3 * 0.4) / 3600);
    expect(last.quantity).toBeLessThanOrEqual((3 * (elapsedS + 0.05)) / 3600);

    const bucket = await events('bucket_storage_gb_hours');
    expect(bucket.length).toBeGreaterThanOrEqual(1);
    const perSecond = 1 / 1024 / 3600; // 1 MiB = 1/1024 GB, per hour
    expect(bucket.at(-1)!.quantity).toBeGreaterThan(perSecond * 0.4);
    expect(bucket.at(-1)!.quantity).toBeLessThanOrEqual(perSecond * (elapsedS + 0.05));
  });
});

describe('presign on a blocked account', () => {
  it('passes a download and refuses an upload with 402 credit-blocked', async () => {
    expect(
      (
        await tp.admin('PUT', '/admin/v1/prices', {
          prices: { machine_running_seconds: 1_000_000_000 },
        })
      ).status,
    ).toBe(200);
    await new Promise((r) => setTimeout(r, 1100));
    await recordUsage(tp.platform.ctx.db, [
      { orgId: org.id, kind: 'machine_running_seconds', quantity: 1 },
    ]);
    await new Promise((r) => setTimeout(r, 1100));
    await bookDue(tp.platform.ctx);
    expect((await req('GET', '/v1/billing/credits')).body.blocked).toBe(true);

    const get = await req('POST', '/v1/buckets/meter-bkt/presign', { key: 'a.bin' });
    expect(get.status).toBe(200);
    expect((await fetch(get.body.url)).status).toBe(200);
    const put = await req('POST', '/v1/buckets/meter-bkt/presign', { op: 'put', key: 'b.bin' });
    expect(put.status).toBe(402);
    expect(put.body.code).toBe('credit-blocked');
  });
});
