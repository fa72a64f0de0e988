/**
 * The money path on a real machine: a priced running machine drives a small balance to
 * zero, its projected balance blocks the account, the machine is stopped (not deleted),
 * nothing starts again while blocked, and a grant opens it at once. The ledger sums to
 * the balance to the micro-cent.
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
const net = { bridge: `pb${process.pid % 100000}`, cidr: '' };

const req = (method: string, p: string, body?: unknown) =>
  tp.request(method, p, { token: org.token, body });

beforeAll(async () => {
  if (!canRunMachines) return;
  net.cidr = await freeMachineCidr(230);
  registry = await startRegistry();
  await pushImage(registry.url, 'idle:1', {
    layers: [busyboxLayer()],
    config: { Cmd: ['/bin/sleep', '3600'] },
  });
  image = `${registry.host}/idle:1`;
  tp = await startTestPlatform({
    machinesBridge: net.bridge,
    machinesCidr: net.cidr,
    trustedRegistries: [registry.host],
    billingWindowSeconds: 1,
    meteringIntervalMs: 200,
  });
  // A cent per running second; prices apply from the next window on.
  expect(
    (await tp.admin('PUT', '/admin/v1/prices', { prices: { machine_running_seconds: 1_000_000 } }))
      .status,
  ).toBe(200);
  await new Promise((r) => setTimeout(r, 1100));
  org = await tp.createOrg({ grantCents: 2 });
  expect((await req('POST', '/v1/apps', { name: 'meter' })).status).toBe(201);
}, 120_000);

afterAll(async () => {
  if (!canRunMachines) return;
  // Open the account whatever happened, so that cleaning up (a write) passes.
  await tp?.admin('POST', `/admin/v1/orgs/${org.id}/grants`, { amountCents: 1_000_000 });
  for (const m of (await req('GET', '/v1/apps/meter/machines')).body ?? []) {
    await req('POST', `/v1/machines/${m.id}/destroy`);
  }
  await tp?.close();
  await registry?.stop();
  await removeMachinesNetwork(net.bridge, net.cidr);
});

describe.skipIf(!canRunMachines)('a priced machine on a small balance', () => {
  let id: string;

  it('runs until its projected balance reaches zero, then is stopped, not deleted', async () => {
    // It listens on no port: ready once booted.
    const created = await req('POST', '/v1/apps/meter/machines', { image, readiness: 'boot' });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    id = created.body.id;
    expect(created.body.observedState).toBe('running');

    await waitFor(
      async () => (await req('GET', '/v1/billing/credits')).body.blocked === true,
      'the account to block',
      20_000,
    );
    await waitFor(
      async () => (await req('GET', `/v1/machines/${id}`)).body.observedState === 'stopped',
      'the machine to stop',
      20_000,
    );
    const machine = await req('GET', `/v1/machines/${id}`);
    expect(machine.status).toBe(200);
    expect(machine.body).toMatchObject({ observedState: 'stopped', desiredState: 'stopped' });

    // Blocked at the projection, maybe before its last windows were booked: once they
    // are (one-second windows), the booked balance is at or below zero too.
    const credits = await waitFor(
      async () => {
        const c = await req('GET', '/v1/billing/credits');
        return BigInt(c.body.balanceMicros) <= 0n ? c : undefined;
      },
      'the booked balance to reach zero',
      10_000,
    );
    const ledger = await req('GET', '/v1/billing/ledger?limit=500');
    const usage = ledger.body.entries.filter((e: { kind: string }) => e.kind === 'usage');
    expect(usage.length).toBeGreaterThan(0);
    for (const e of usage) expect(e.reference).toBe('machine_running_seconds');
    const sum = ledger.body.entries.reduce(
      (n: bigint, e: { amountMicros: string }) => n + BigInt(e.amountMicros),
      0n,
    );
    expect(sum.toString()).toBe(credits.body.balanceMicros);
  }, 60_000);

  it('starts nothing while blocked: start and create answer 402 credit-blocked', async () => {
    const start = await req('POST', `/v1/machines/${id}/start`);
    expect(start.status).toBe(402);
    expect(start.body.code).toBe('credit-blocked');
    const create = await req('POST', '/v1/apps/meter/machines', { image, readiness: 'boot' });
    expect(create.status).toBe(402);
    // Reads stay open.
    expect((await req('GET', `/v1/machines/${id}`)).status).toBe(200);
    expect((await req('GET', '/v1/apps/meter/machines')).status).toBe(200);
  });

  it('starts again once a grant lifts the balance above zero', async () => {
    const grant = await tp.admin('POST', `/admin/v1/orgs/${org.id}/grants`, {
      amountCents: 10_000,
    });
    expect(grant.status).toBe(201);
    expect((await req('GET', '/v1/billing/credits')).body.blocked).toBe(false);
    const start = await req('POST', `/v1/machines/${id}/start`);
    expect(start.status, JSON.stringify(start.body)).toBe(200);
    expect(start.body.observedState).toBe('running');
    expect((await req('POST', `/v1/machines/${id}/stop`)).status).toBe(200);
  }, 30_000);
});
