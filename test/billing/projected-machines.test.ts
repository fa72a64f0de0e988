/**
 * Credit stops at zero with the default settings (a booking window of an hour, a
 * metering tick of 60 s): a priced running machine of an organization with a little
 * credit is blocked within one metering tick of its projected balance (booked minus
 * recorded and not booked) reaching zero, long before its window is booked; the machine
 * is stopped, writes answer 402, and a grant opens the account again.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { busyboxLayer, pushImage } from '../../src/runtime/images/build.test-helper.js';
import { waitFor } from '../databases/helpers.js';
import { startTestPlatform, type TestOrg, type TestPlatform } from '../helpers/platform.js';
import { startRegistry, type TestRegistry } from '../helpers/registry.js';
import { canRunMachines, freeMachineCidr, removeMachinesNetwork } from '../machines/bed.js';

let registry: TestRegistry;
let tp: TestPlatform;
let org: TestOrg;
let image: string;
const net = { bridge: `pj${process.pid % 100000}`, cidr: '' };
/** A cent per running second, and ten cents of credit: zero ten seconds after the start. */
const PRICE = 1_000_000;
const CREDIT_CENTS = 10;
const TICK_MS = 60_000;

const req = (method: string, p: string, body?: unknown) =>
  tp.request(method, p, { token: org.token, body });

beforeAll(async () => {
  if (!canRunMachines) return;
  net.cidr = await freeMachineCidr(232);
  registry = await startRegistry();
  await pushImage(registry.url, 'idle:1', {
    layers: [busyboxLayer()],
    config: { Cmd: ['/bin/sleep', '3600'] },
  });
  image = `${registry.host}/idle:1`;
  // The defaults: no window, no tick set here.
  tp = await startTestPlatform({
    machinesBridge: net.bridge,
    machinesCidr: net.cidr,
    trustedRegistries: [registry.host],
  });
  const prices = { prices: { machine_running_seconds: PRICE } };
  expect((await tp.admin('PUT', '/admin/v1/prices', prices)).status).toBe(200);
  org = await tp.createOrg({ grantCents: CREDIT_CENTS });
  expect((await req('POST', '/v1/apps', { name: 'burn' })).status).toBe(201);
}, 120_000);

afterAll(async () => {
  if (!canRunMachines) return;
  await tp?.admin('POST', `/admin/v1/orgs/${org.id}/grants`, { amountCents: 1_000_000 });
  for (const m of (await req('GET', '/v1/apps/burn/machines')).body ?? []) {
    await req('POST', `/v1/machines/${m.id}/destroy`);
  }
  await tp?.close();
  await registry?.stop();
  await removeMachinesNetwork(net.bridge, net.cidr);
});

describe.skipIf(!canRunMachines)('credit at zero with the default window and tick', () => {
  let id: string;

  it('runs with the defaults: an hour’s window, a tick of at most 60 s', () => {
    expect(tp.platform.ctx.config.billingWindowSeconds).toBe(3600);
    expect(tp.platform.ctx.config.meteringIntervalMs).toBeLessThanOrEqual(TICK_MS);
  });

  it('blocks within one tick of the projected balance reaching zero, and stops the machine', async () => {
    const created = await req('POST', '/v1/apps/burn/machines', { image, readiness: 'boot' });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    id = created.body.id;
    const readyAt = new Date(created.body.readyAt ?? Date.now()).getTime();
    // Charged from its start at the latest: the projection is at zero by then.
    const zeroAt = readyAt + (CREDIT_CENTS * 1_000_000 * 1000) / PRICE;

    const account = await waitFor(
      async () => {
        const c = (await req('GET', '/v1/billing/credits')).body;
        return c.blocked ? c : undefined;
      },
      'the account to block',
      TICK_MS + 30_000,
    );
    const late = new Date(account.blockedAt).getTime() - zeroAt;
    // One tick, and the tick's own work (metering and the check, under a second).
    expect(late).toBeLessThanOrEqual(TICK_MS + 2000);
    // Nothing was booked: the window of an hour is still open.
    const ledger = (await req('GET', '/v1/billing/ledger?limit=500')).body.entries;
    expect(ledger.filter((e: { kind: string }) => e.kind === 'usage')).toEqual([]);
    expect(account.balanceMicros).toBe(String(CREDIT_CENTS * 1_000_000));

    await waitFor(
      async () => (await req('GET', `/v1/machines/${id}`)).body.observedState === 'stopped',
      'the machine to stop',
      30_000,
    );
    expect((await req('GET', `/v1/machines/${id}`)).body).toMatchObject({
      desiredState: 'stopped',
    });
    const write = await req('POST', '/v1/apps', { name: 'more' });
    expect([write.status, write.body.code]).toEqual([402, 'credit-blocked']);
    const start = await req('POST', `/v1/machines/${id}/start`);
    expect([start.status, start.body.code]).toEqual([402, 'credit-blocked']);
  }, 150_000);

  it('opens again after a grant that covers what was used', async () => {
    const grant = await tp.admin('POST', `/admin/v1/orgs/${org.id}/grants`, {
      amountCents: 100_000,
    });
    expect(grant.status).toBe(201);
    expect((await req('GET', '/v1/billing/credits')).body.blocked).toBe(false);
    const start = await req('POST', `/v1/machines/${id}/start`);
    expect(start.status, JSON.stringify(start.body)).toBe(200);
    expect((await req('POST', `/v1/machines/${id}/stop`)).status).toBe(200);
  }, 60_000);
});
