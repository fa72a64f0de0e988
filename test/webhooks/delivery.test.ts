/**
 * Deliveries end to end: a mail event from the operator route, a real pier dispatcher, a
 * real HTTP receiver on loopback, and `standardwebhooks` (a verifier nobody here wrote)
 * checking every signature. The retry schedule is scaled down (PIER_WEBHOOK_RETRY_SCALE)
 * so eight attempts take about a second; Retry-After is the endpoint's and is not scaled.
 */
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ResolvedAddress } from '../../src/host/outbound-guard.js';
import { enqueue } from '../../src/jobs/queue.js';
import { MAX_ATTEMPTS } from '../../src/services/webhooks/schedule.js';
import { startTestPlatform, type TestOrg, type TestPlatform } from '../helpers/platform.js';
import { startReceiver, type Receiver } from './receiver.js';

const SCALE = 0.00001;
const TIMEOUT_MS = 800;

/** `rebind.test` answers a public address once (the create's check), loopback after. */
let rebindLookups = 0;
async function resolve(name: string): Promise<ResolvedAddress[]> {
  if (name !== 'rebind.test') throw Object.assign(new Error('ENOTFOUND'), { code: 'ENOTFOUND' });
  return [{ address: rebindLookups++ === 0 ? '93.184.216.34' : '127.0.0.1', family: 4 }];
}

let tp: TestPlatform;
let org: TestOrg;
let receiver: Receiver;

beforeAll(async () => {
  receiver = await startReceiver();
  tp = await startTestPlatform(
    {
      trustedRegistries: [`127.0.0.1:${receiver.port}`],
      webhookRetryScale: SCALE,
      webhookTimeoutMs: TIMEOUT_MS,
    },
    { resolve },
  );
  org = await tp.createOrg();
});
afterAll(async () => {
  await tp?.close();
  await receiver?.close();
});

async function hook(path: string, events = ['email.sent']) {
  const res = await tp.request('POST', '/v1/webhooks', {
    token: org.token,
    body: { url: `${receiver.url}${path}`, events },
  });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body as { id: string; secret: string };
}

async function emit(kind: string, data: Record<string, unknown> = {}) {
  const res = await tp.admin('POST', `/admin/v1/orgs/${org.id}/mail-events`, { kind, data });
  expect(res.status).toBe(202);
  return res.body as { id: string; deliveries: number };
}

const deliveries = async (id: string) =>
  (await tp.request('GET', `/v1/webhooks/${id}/deliveries`, { token: org.token })).body;

/** Polls the deliveries route until `done` says so. */
async function until(id: string, done: (d: any[]) => boolean, timeoutMs = 10_000) {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const list = await deliveries(id);
    if (done(list)) return list;
    if (Date.now() > end) throw new Error(`deliveries never settled: ${JSON.stringify(list)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const settled = (d: any[]) => d.length > 0 && d.every((x) => x.status !== 'pending');

describe('webhook deliveries', () => {
  it('signs each delivery so that standardwebhooks verifies it', async () => {
    const h = await hook('/ok/signed', ['email.sent', 'email.delivered']);
    const event = await emit('email.delivered', { messageId: 'm-1', to: ['x@y.test'] });
    expect(event.deliveries).toBe(1);
    const [got] = await receiver.waitFor('/ok/signed');
    const verified = new Webhook(h.secret).verify(
      got!.body,
      got!.headers as Record<string, string>,
    );
    expect(verified).toEqual({
      type: 'email.delivered',
      timestamp: expect.any(String),
      data: { messageId: 'm-1', to: ['x@y.test'] },
    });
    expect(got!.headers['webhook-id']).toBe(event.id);
    expect(got!.headers['content-type']).toBe('application/json');
    // Another secret, or a changed body, does not verify.
    const wrong = new Webhook(`whsec_${Buffer.alloc(24, 7).toString('base64')}`);
    expect(() => wrong.verify(got!.body, got!.headers as Record<string, string>)).toThrow();
    expect(() =>
      new Webhook(h.secret).verify(
        got!.body.replace('m-1', 'm-2'),
        got!.headers as Record<string, string>,
      ),
    ).toThrow();

    const [d] = await until(h.id, settled);
    expect(d).toMatchObject({
      webhookId: h.id,
      eventId: event.id,
      type: 'email.delivered',
      status: 'succeeded',
      responseStatus: 200,
      attempts: [
        { attempt: 1, outcome: 'succeeded', responseStatus: 200, durationMs: expect.any(Number) },
      ],
    });
    // Only the kinds the webhook asked for.
    await emit('email.bounced');
    await new Promise((r) => setTimeout(r, 200));
    expect(receiver.to('/ok/signed')).toHaveLength(1);
  });

  it('retries a failing endpoint on the schedule, with the same id, until it answers', async () => {
    const h = await hook('/fail/2/retry');
    const event = await emit('email.sent');
    const got = await receiver.waitFor('/fail/2/retry', 3);
    expect(new Set(got.map((r) => r.headers['webhook-id']))).toEqual(new Set([event.id]));
    for (const r of got) new Webhook(h.secret).verify(r.body, r.headers as Record<string, string>);
    const [d] = await until(h.id, settled);
    expect(d.status).toBe('succeeded');
    expect(d.attempts.map((a: any) => [a.attempt, a.outcome, a.responseStatus])).toEqual([
      [1, 'retry', 500],
      [2, 'retry', 500],
      [3, 'succeeded', 200],
    ]);
    expect(d.attempts[0].error).toMatch(/500/);
    expect(Date.parse(d.attempts[0].nextAttemptAt)).toBeGreaterThanOrEqual(
      Date.parse(d.attempts[0].at),
    );
  });

  it(`fails a delivery after ${MAX_ATTEMPTS} attempts`, async () => {
    const h = await hook('/fail/100/never');
    await emit('email.sent');
    const [d] = await until(h.id, settled, 20_000);
    expect(d.status).toBe('failed');
    expect(d.attempts).toHaveLength(MAX_ATTEMPTS);
    expect(d.attempts.at(-1)).toMatchObject({ outcome: 'failed', responseStatus: 500 });
    expect(d.attempts.at(-1).nextAttemptAt).toBeUndefined();
    expect(receiver.to('/fail/100/never')).toHaveLength(MAX_ATTEMPTS);
  });

  it('honours Retry-After', async () => {
    const h = await hook('/retry-after/1/x');
    await emit('email.sent');
    const [first, second] = await receiver.waitFor('/retry-after/1/x', 2);
    // The schedule alone would retry within milliseconds; the endpoint asked for a second.
    expect(second!.at - first!.at).toBeGreaterThanOrEqual(950);
    const [d] = await until(h.id, settled);
    expect(d.attempts.map((a: any) => a.responseStatus)).toEqual([503, 200]);
  });

  it('disables the webhook on 410 and sends it nothing more', async () => {
    const h = await hook('/gone/x');
    await emit('email.sent');
    await until(h.id, settled);
    const got = await tp.request('GET', `/v1/webhooks/${h.id}`, { token: org.token });
    expect(got.body).toMatchObject({
      enabled: false,
      disabledReason: expect.stringMatching(/410/),
    });
    expect((await deliveries(h.id))[0].attempts).toEqual([
      expect.objectContaining({ outcome: 'disabled', responseStatus: 410 }),
    ]);
    const later = await emit('email.sent');
    await new Promise((r) => setTimeout(r, 200));
    expect(receiver.to('/gone/x')).toHaveLength(1);
    expect((await deliveries(h.id)).map((d: any) => d.eventId)).not.toContain(later.id);
  });

  it('times out a silent endpoint and is not held by an endless answer', async () => {
    const slow = await hook('/slow/x');
    const huge = await hook('/huge/x');
    const ok = await hook('/ok/beside');
    await emit('email.sent');
    // The healthy endpoint is served at once, whatever the others do.
    await receiver.waitFor('/ok/beside');
    const [h] = await until(huge.id, (d) => d[0]?.attempts.length > 0);
    expect(h.attempts[0]).toMatchObject({ outcome: 'succeeded', responseStatus: 200 });
    expect(h.attempts[0].durationMs).toBeLessThan(TIMEOUT_MS);
    const [s] = await until(slow.id, (d) => d[0]?.attempts.length > 0);
    expect(s.attempts[0]).toMatchObject({
      outcome: 'retry',
      error: `no answer within ${TIMEOUT_MS} ms`,
    });
    expect(s.attempts[0].responseStatus).toBeUndefined();
    // Stop retrying the silent one: deleting a webhook ends its pending deliveries.
    expect(
      (await tp.request('DELETE', `/v1/webhooks/${slow.id}`, { token: org.token })).status,
    ).toBe(204);
    expect((await until(ok.id, settled))[0].status).toBe('succeeded');
  });

  it('refuses at send time a name that now resolves to loopback (DNS rebinding)', async () => {
    rebindLookups = 0;
    const res = await tp.request('POST', '/v1/webhooks', {
      token: org.token,
      body: { url: `http://rebind.test:${receiver.port}/ok/rebind`, events: ['email.failed'] },
    });
    expect(res.status).toBe(201);
    await emit('email.failed');
    const [d] = await until(res.body.id, (x) => x[0]?.attempts.length > 0);
    expect(d.attempts[0].error).toMatch(/127\.0\.0\.1 is a loopback address/);
    expect(d.attempts[0].responseStatus).toBeUndefined();
    expect(receiver.to('/ok/rebind')).toHaveLength(0);
    await tp.request('DELETE', `/v1/webhooks/${res.body.id}`, { token: org.token });
  });

  it('stops pending deliveries when the webhook is deleted', async () => {
    const h = await hook('/retry-after/30/deleted');
    await emit('email.sent');
    await receiver.waitFor('/retry-after/30/deleted');
    const [d] = await until(h.id, (x) => x[0]?.attempts.length === 1);
    expect(d.status).toBe('pending');
    expect((await tp.request('DELETE', `/v1/webhooks/${h.id}`, { token: org.token })).status).toBe(
      204,
    );
    const { rows } = await tp.platform.store.pool.query(
      'SELECT count(*)::int AS n FROM webhook_deliveries WHERE webhook_id = $1',
      [h.id],
    );
    expect(rows[0].n).toBe(0);
  });

  it('limits the deliveries listed, and prunes old ones', async () => {
    const h = await hook('/ok/many', ['email.complained']);
    for (let i = 0; i < 5; i++) await emit('email.complained', { i });
    await receiver.waitFor('/ok/many', 5);
    const res = await tp.request('GET', `/v1/webhooks/${h.id}/deliveries?limit=2`, {
      token: org.token,
    });
    expect(res.body).toHaveLength(2);
    const bad = await tp.request('GET', `/v1/webhooks/${h.id}/deliveries?limit=0`, {
      token: org.token,
    });
    expect(bad.status).toBe(400);
    expect(bad.body.issues[0].path).toBe('limit');

    // Finished deliveries older than the retention are pruned, with events no one names.
    await until(h.id, (d) => d.length === 5 && settled(d));
    await tp.platform.store.pool.query(
      `UPDATE webhook_deliveries SET finished_at = now() - interval '31 days' WHERE webhook_id = $1`,
      [h.id],
    );
    await tp.platform.store.pool.query(
      `UPDATE webhook_events SET created_at = now() - interval '31 days'
       WHERE id IN (SELECT event_id FROM webhook_deliveries WHERE webhook_id = $1)`,
      [h.id],
    );
    const events = (
      await tp.platform.store.pool.query(
        'SELECT event_id FROM webhook_deliveries WHERE webhook_id = $1',
        [h.id],
      )
    ).rows.map((r) => r.event_id);
    await enqueue(tp.platform.ctx.db, tp.platform.ctx.jobs, 'webhooks.prune', {});
    await until(h.id, (d) => d.length === 0);
    for (let i = 0; ; i++) {
      const { rows } = await tp.platform.store.pool.query(
        'SELECT count(*)::int AS n FROM webhook_events WHERE id = ANY($1)',
        [events],
      );
      if (rows[0].n === 0) break;
      if (i > 100) throw new Error('events were not pruned');
      await new Promise((r) => setTimeout(r, 50));
    }
  });
});
