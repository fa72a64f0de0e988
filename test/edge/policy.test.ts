/**
 * Network policy (spec 4.6) measured on a real machine: with `bandwidthMbit` set, a
 * transfer each way (to the machine: tc's token bucket; from it: the policer) takes at
 * least about the time the limit implies, where without it it is far faster; with
 * `newConnectionsPerMinute: 100` the 100th new connection passes and the 101st is
 * refused; a restarted machine gets its policy again; null lifts the limits. Plus the
 * routes' bad input, other organizations and keys.
 */
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { busyboxLayer, DEFAULT_APPLETS } from '../../src/runtime/images/build.test-helper.js';
import { removeNetworkPolicy } from '../../src/runtime/sandbox/network-policy.js';
import { hostBinariesLayer } from '../../src/runtime/images/host-binaries.test-helper.js';
import { canRunMachines, startMachineBed, type MachineBed } from '../machines/bed.js';
import { keyOf } from './edge.test-helper.js';

let bed: MachineBed;
let ip: string;
let machineId: string;
const N = '/v1/apps/limited/policy/network';
const SIZE = 1_500_000;
const MBIT = 4;
/** Seconds SIZE bytes take at MBIT. */
const IDEAL_S = (SIZE * 8) / (MBIT * 1_000_000);

/** Seconds to download SIZE bytes from the machine's httpd (traffic from the machine). */
function download(): Promise<number> {
  const t0 = performance.now();
  return fetch(`http://${ip}:3000/big`).then(async (res) => {
    const bytes = (await res.arrayBuffer()).byteLength;
    expect(bytes).toBe(SIZE);
    return (performance.now() - t0) / 1000;
  });
}

/** Seconds to send SIZE bytes to the machine's sink on port 4000 (traffic to the machine). */
function upload(): Promise<number> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const s = net.connect(4000, ip, () => s.end(Buffer.alloc(SIZE, 7)));
    let reply = '';
    s.setEncoding('utf8');
    s.on('data', (c: string) => (reply += c));
    s.on('close', () =>
      reply.includes('done')
        ? resolve((performance.now() - t0) / 1000)
        : reject(new Error(`sink answered ${JSON.stringify(reply)}`)),
    );
    s.on('error', reject);
  });
}

/** Whether a new TCP connection to the machine's port 5000 (socat) is accepted. */
function connects(): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect(5000, ip, () => {
      s.destroy();
      resolve(true);
    });
    s.on('error', () => resolve(false));
    s.setTimeout(3000, () => {
      s.destroy();
      resolve(false);
    });
  });
}

beforeAll(async () => {
  if (!canRunMachines) return;
  // Liveness probes are new connections to the machine too: one a minute here, so they
  // take no token from the 100 the connection test counts.
  bed = await startMachineBed('pn', 80, { livenessIntervalMs: 60_000 });
  const image = await bed.image('limited:1', {
    layers: [
      busyboxLayer([...DEFAULT_APPLETS, 'nc']),
      hostBinariesLayer(['/usr/bin/socat']),
      [
        { path: 'www/' },
        { path: 'www/big', content: Buffer.alloc(SIZE, 1) },
        { path: 'bin/sink', content: '#!/bin/sh\ncat > /dev/null\necho done\n', mode: 0o755 },
      ],
    ],
    config: {
      Cmd: [
        '/bin/sh',
        '-c',
        'httpd -p 3000 -h /www; /usr/bin/socat TCP-LISTEN:5000,fork,reuseaddr,backlog=512 OPEN:/dev/null & exec nc -ll -p 4000 -e /bin/sink',
      ],
    },
  });
  expect((await bed.req('POST', '/v1/apps', { name: 'limited' })).status).toBe(201);
  const m = await bed.req('POST', '/v1/apps/limited/machines', { image });
  expect(m.status, JSON.stringify(m.body)).toBe(201);
  ip = m.body.privateIp;
  machineId = m.body.id;
}, 180_000);

afterAll(async () => {
  if (bed) await bed.close();
  // The platform is gone: whatever of the policy its last change word left is removed.
  if (machineId) await removeNetworkPolicy(machineId);
});

describe.skipIf(!canRunMachines)('network policy', () => {
  it('has no limits by default; transfers are fast', async () => {
    const res = await bed.req('GET', N);
    expect(res.body).toEqual({
      appName: 'limited',
      bandwidthMbit: null,
      newConnectionsPerMinute: null,
    });
    expect(await download()).toBeLessThan(IDEAL_S / 2);
    expect(await upload()).toBeLessThan(IDEAL_S / 2);
  });

  it('bandwidthMbit slows transfers both ways to the limit', async () => {
    const res = await bed.req('PUT', N, {
      bandwidthMbit: MBIT,
      newConnectionsPerMinute: null,
      reason: 'a noisy neighbour',
    });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toMatchObject({ bandwidthMbit: MBIT, reason: 'a noisy neighbour' });
    expect(res.body.appliedTo).toEqual([machineId]);
    // A transfer faster than the limit allows fails the test (10% for the bucket's burst).
    const down = await download();
    const up = await upload();
    console.log(`policy: ${SIZE} B at ${MBIT} Mbit/s, ideal ${IDEAL_S}s: down ${down}s, up ${up}s`);
    expect(down).toBeGreaterThan(IDEAL_S * 0.9);
    expect(up).toBeGreaterThan(IDEAL_S * 0.9);
    expect((await bed.req('GET', N)).body.reason).toBe('a noisy neighbour');
  });

  it('newConnectionsPerMinute: the 100th passes, the 101st is refused', async () => {
    await bed.req('PUT', N, { bandwidthMbit: null, newConnectionsPerMinute: 100 });
    // All at once, so the bucket (one token back every 0.6 s) refills nothing meanwhile;
    // the listener's backlog (512) holds them all.
    const t0 = performance.now();
    const first = await Promise.all(Array.from({ length: 100 }, () => connects()));
    console.log(`policy: 100 connections in ${Math.round(performance.now() - t0)} ms`);
    expect(first.filter(Boolean).length).toBe(100);
    expect(await connects()).toBe(false);
  });

  it('a restarted machine gets the policy again; null lifts it', async () => {
    await bed.req('PUT', N, { bandwidthMbit: MBIT, newConnectionsPerMinute: 100 });
    expect((await bed.req('POST', `/v1/machines/${machineId}/stop`)).status).toBe(200);
    const started = await bed.req('POST', `/v1/machines/${machineId}/start`);
    expect(started.body.observedState).toBe('running');
    ip = started.body.privateIp;
    // Applied on the machine's change words, as it starts and once settled.
    await new Promise((r) => setTimeout(r, 1500));
    expect(await download()).toBeGreaterThan(IDEAL_S * 0.9);
    const lifted = await bed.req('PUT', N, { bandwidthMbit: null, newConnectionsPerMinute: null });
    expect(lifted.body).toMatchObject({ bandwidthMbit: null, newConnectionsPerMinute: null });
    expect(lifted.body.reason).toBeUndefined();
    expect(await download()).toBeLessThan(IDEAL_S / 2);
    let passed = 0;
    for (let i = 0; i < 120; i++) if (await connects()) passed++;
    expect(passed).toBe(120);
  });

  it('refuses bad input; other organizations see nothing; keys are judged', async () => {
    const cases: [unknown, string[]][] = [
      [{}, ['bandwidthMbit', 'newConnectionsPerMinute']],
      [
        { bandwidthMbit: 0, newConnectionsPerMinute: -1 },
        ['bandwidthMbit', 'newConnectionsPerMinute'],
      ],
      [
        { bandwidthMbit: 1.5, newConnectionsPerMinute: null, reason: 'x'.repeat(501) },
        ['bandwidthMbit', 'reason'],
      ],
      [
        { bandwidthMbit: '5', newConnectionsPerMinute: 1e9 },
        ['bandwidthMbit', 'newConnectionsPerMinute'],
      ],
    ];
    for (const [body, fields] of cases) {
      const res = await bed.req('PUT', N, body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.issues.map((i: { path: string }) => i.path).sort()).toEqual(fields.sort());
    }
    const ok = { bandwidthMbit: null, newConnectionsPerMinute: null };
    const other = await bed.tp.createOrg();
    expect((await bed.req('GET', N, undefined, other.token)).status).toBe(404);
    expect((await bed.req('PUT', N, ok, other.token)).body.code).toBe('not-found');
    expect((await bed.req('GET', '/v1/apps/nowhere/policy/network')).status).toBe(404);
    const reader = await keyOf(bed, { scopes: ['read'] });
    expect((await bed.req('GET', N, undefined, reader)).status).toBe(200);
    expect((await bed.req('PUT', N, ok, reader)).body.code).toBe('token-scope');
    const prod = await keyOf(bed, { agent: { class: 'production', apps: ['limited'] } });
    expect((await bed.req('PUT', N, ok, prod)).body.code).toBe('agent-token-production-readonly');
    const limited = await keyOf(bed, { agent: { class: 'twin', apps: ['other'] } });
    expect((await bed.req('PUT', N, ok, limited)).body.code).toBe('agent-token-app-scope');
  });
});
