/**
 * Public UDP endpoints (spec 4.6): a datagram round trip through the endpoint's public
 * port to an echo server in a real machine (socat from the host, in the image), list,
 * delete (the port stops answering), the per-organization limit, bad input, other
 * organizations and keys.
 */
import dgram from 'node:dgram';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { busyboxLayer } from '../../src/runtime/images/build.test-helper.js';
import { hostBinariesLayer } from '../../src/runtime/images/host-binaries.test-helper.js';
import { canRunMachines, startMachineBed, type MachineBed } from '../machines/bed.js';
import { keyOf } from './edge.test-helper.js';

let bed: MachineBed;
const U = '/v1/apps/echo/udp';

/** Sends `text` to 127.0.0.1:`port` and resolves with the reply, or undefined after `ms`. */
function roundTrip(port: number, text: string, ms = 2000): Promise<string | undefined> {
  return new Promise((resolve) => {
    const s = dgram.createSocket('udp4');
    const done = (v: string | undefined) => {
      clearTimeout(timer);
      s.close();
      resolve(v);
    };
    const timer = setTimeout(() => done(undefined), ms);
    s.on('message', (m) => done(m.toString()));
    s.send(text, port, '127.0.0.1');
  });
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
