/**
 * Public UDP endpoints (spec 4.6): a datagram round trip through the endpoint's public
 * port to an echo server in a real machine (socat from the host, in the image), list,
 * delete (the port stops answering), a datagram waking the suspended machine (and
 * answered), a second relay on the host (as another replica's) taking a port over once
 * the first releases it, the per-organization limit, bad input, other organizations and keys.
 */
import dgram from 'node:dgram';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { busyboxLayer } from '../../src/runtime/images/build.test-helper.js';
import { hostBinariesLayer } from '../../src/runtime/images/host-binaries.test-helper.js';
import { canRunMachines, startMachineBed, type MachineBed } from '../machines/bed.js';
import { UdpRelays, udpRelaysOf } from '../../src/services/apps/udp-relay.js';
import { keyOf } from './edge.test-helper.js';

let bed: MachineBed;
let machineId: string;
const U = '/v1/apps/echo/udp';

/** A client socket; `ask` sends `text` to 127.0.0.1:`port`: the reply, or undefined after `ms`. */
function client() {
  const s = dgram.createSocket('udp4');
  const ask = (port: number, text: string, ms = 2000) =>
    new Promise<string | undefined>((resolve) => {
      const done = (v: string | undefined) => {
        clearTimeout(timer);
        s.removeAllListeners('message');
        resolve(v);
      };
      const timer = setTimeout(() => done(undefined), ms);
      s.on('message', (m) => done(m.toString()));
      s.send(text, port, '127.0.0.1');
    });
  return { ask, close: () => s.close() };
}

/** One datagram from a new client (a flow of its own): the reply, or undefined after `ms`. */
async function roundTrip(port: number, text: string, ms = 2000): Promise<string | undefined> {
  const c = client();
  try {
    return await c.ask(port, text, ms);
  } finally {
    c.close();
  }
}

beforeAll(async () => {
  if (!canRunMachines) return;
  bed = await startMachineBed('pu', 70);
  const image = await bed.image('echo:1', {
    layers: [busyboxLayer(), hostBinariesLayer(['/usr/bin/socat'])],
    config: { Cmd: ['/usr/bin/socat', 'UDP4-RECVFROM:5353,fork', 'PIPE'] },
  });
  expect((await bed.req('POST', '/v1/apps', { name: 'echo' })).status).toBe(201);
  const m = await bed.req('POST', '/v1/apps/echo/machines', {
    image,
    internalPort: 5353,
    readiness: 'boot',
  });
  expect(m.status, JSON.stringify(m.body)).toBe(201);
  machineId = m.body.id;
}, 180_000);

afterAll(async () => {
  if (bed) await bed.close();
});

describe.skipIf(!canRunMachines)('UDP endpoints', () => {
  it('forwards datagrams to the machine and the replies back', async () => {
    const created = await bed.req('POST', U, {});
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const ep = created.body;
    expect(ep).toMatchObject({ appName: 'echo', targetPort: 5353, host: '127.0.0.1' });
    expect(ep.publicPort).toBeGreaterThanOrEqual(40000);
    expect(ep.publicPort).toBeLessThanOrEqual(40999);
    expect(ep.address).toBe(`127.0.0.1:${ep.publicPort}`);
    expect(ep.note).toMatch(/UDP/);
    expect(ep.id).toMatch(/^udp-/);
    // The machine may still be binding its port: a few tries.
    let reply: string | undefined;
    for (let i = 0; i < 10 && reply === undefined; i++)
      reply = await roundTrip(ep.publicPort, 'ping', 500);
    expect(reply).toBe('ping');
    // A second client gets a flow of its own.
    expect(await roundTrip(ep.publicPort, 'second')).toBe('second');

    const listed = await bed.req('GET', U);
    expect(listed.body.map((e: { id: string }) => e.id)).toEqual([ep.id]);
    expect(listed.body[0].note).toBeUndefined();

    expect((await bed.req('DELETE', `${U}/${ep.id}`)).status).toBe(204);
    expect((await bed.req('DELETE', `${U}/${ep.id}`)).status).toBe(404);
    expect(await roundTrip(ep.publicPort, 'gone?', 500)).toBeUndefined();
    expect((await bed.req('GET', U)).body).toEqual([]);
  });

  it('wakes a suspended machine, for a new client and for a flow made before; the datagram that woke it is answered', async () => {
    const ep = (await bed.req('POST', U, {})).body;
    const M = `/v1/machines/${machineId}`;
    const old = client();
    try {
      expect(await old.ask(ep.publicPort, 'awake')).toBe('awake');
      expect((await bed.req('POST', `${M}/suspend`)).body.observedState).toBe('suspended');
      // Held while the machine thaws, then sent: the first datagram gets its answer.
      const t0 = performance.now();
      expect(await roundTrip(ep.publicPort, 'wake up', 5000)).toBe('wake up');
      console.log(`udp: a datagram woke the machine in ${Math.round(performance.now() - t0)} ms`);
      expect((await bed.req('GET', M)).body.observedState).toBe('running');
      // A client whose flow began before the machine slept wakes it too.
      expect((await bed.req('POST', `${M}/suspend`)).body.observedState).toBe('suspended');
      expect(await old.ask(ep.publicPort, 'again', 5000)).toBe('again');
      expect((await bed.req('GET', M)).body.observedState).toBe('running');
    } finally {
      old.close();
    }
    expect((await bed.req('DELETE', `${U}/${ep.id}`)).status).toBe(204);
  });

  it('a second relay on the host (another replica) leaves a held port alone and takes it over once released', async () => {
    const ep = (await bed.req('POST', U, {})).body;
    const { ctx, config } = bed.tp.platform;
    const second = new UdpRelays(ctx, config.listenHost);
    try {
      await second.sync(); // EADDRINUSE: the first relay holds the port, and serves it
      expect(await roundTrip(ep.publicPort, 'first')).toBe('first');
      udpRelaysOf(ctx)!.close(ep.id); // as if the first replica went away
      await second.sync();
      expect(await roundTrip(ep.publicPort, 'second')).toBe('second');
    } finally {
      second.stop();
    }
    expect((await bed.req('DELETE', `${U}/${ep.id}`)).status).toBe(204);
  });

  it('takes an explicit targetPort, and holds the organization to its limit', async () => {
    const one = await bed.req('POST', U, { targetPort: 7 });
    expect([one.status, one.body.targetPort]).toEqual([201, 7]);
    const bodiless = await bed.req('POST', U);
    expect([bodiless.status, bodiless.body.targetPort], JSON.stringify(bodiless.body)).toEqual([
      201, 5353,
    ]);
    for (let i = 2; i < 10; i++) expect((await bed.req('POST', U, {})).status).toBe(201);
    const over = await bed.req('POST', U, {});
    expect(over.status).toBe(403);
    expect(over.body).toMatchObject({ code: 'org-limit-udp', limit: 10, current: 10 });
    for (const e of (await bed.req('GET', U)).body) {
      expect((await bed.req('DELETE', `${U}/${e.id}`)).status).toBe(204);
    }
  });

  it('refuses bad input; other organizations see nothing; keys are judged', async () => {
    for (const targetPort of [0, 65536, 1.5, '53']) {
      const res = await bed.req('POST', U, { targetPort });
      expect(res.status).toBe(400);
      expect(res.body.issues[0].path).toBe('targetPort');
    }
    expect((await bed.req('POST', U, { targetPort: 53, extra: true })).status).toBe(400);
    const mine = await bed.req('POST', U, {});
    const other = await bed.tp.createOrg();
    for (const [method, path, body] of [
      ['GET', U],
      ['POST', U, {}],
      ['DELETE', `${U}/${mine.body.id}`],
    ] as [string, string, unknown][]) {
      const res = await bed.req(method, path, body, other.token);
      expect([res.status, res.body.code]).toEqual([404, 'not-found']);
    }
    expect((await bed.req('DELETE', `/v1/apps/nowhere/udp/${mine.body.id}`)).status).toBe(404);
    const reader = await keyOf(bed, { scopes: ['read'] });
    expect((await bed.req('GET', U, undefined, reader)).status).toBe(200);
    expect((await bed.req('POST', U, {}, reader)).body.code).toBe('token-scope');
    const prod = await keyOf(bed, { agent: { class: 'production', apps: ['echo'] } });
    const ro = await bed.req('DELETE', `${U}/${mine.body.id}`, undefined, prod);
    expect(ro.body.code).toBe('agent-token-production-readonly');
    const limited = await keyOf(bed, { agent: { class: 'sandbox', apps: ['other'] } });
    expect((await bed.req('POST', U, {}, limited)).body.code).toBe('agent-token-app-scope');
    expect((await bed.req('DELETE', `${U}/${mine.body.id}`)).status).toBe(204);
  });
});
