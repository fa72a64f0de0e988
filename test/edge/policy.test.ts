/**
 * Network policy (spec 4.6) measured on a real machine: with `bandwidthMbit` set, a
 * transfer each way (to the machine: tc's token bucket; from it: the policer) takes at
 * least about the time the limit implies, where without it it is far faster; with
 * `newConnectionsPerMinute: 20` exactly 20 new connections pass, from the host and from a
 * machine of another app on the same bridge, while liveness looks at the machine four
 * times a second (its looks take no token), and the machine cannot remove its limit;
 * a restarted machine gets its policy again; null lifts the limits. Plus the routes' bad
 * input, other organizations and keys.
 */
import { execFile } from 'node:child_process';
import net from 'node:net';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { busyboxLayer, DEFAULT_APPLETS } from '../../src/runtime/images/build.test-helper.js';
import { netnsName, vethName } from '../../src/runtime/sandbox/names.js';
import { NETNS_TABLE, removeNetworkPolicy } from '../../src/runtime/sandbox/network-policy.js';
import { runtimeOf } from '../../src/services/machines/lifecycle.js';
import { hostBinariesLayer } from '../../src/runtime/images/host-binaries.test-helper.js';
import { canRunMachines, startMachineBed, type MachineBed } from '../machines/bed.js';
import { keyOf } from './edge.test-helper.js';

let bed: MachineBed;
let ip: string;
let machineId: string;
/** A machine of another app of the organization, on the same bridge, without a policy. */
let peerId: string;
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

/** Runs `argv` in machine `id` as its own processes run (user, capabilities); code and output. */
async function inMachine(
  id: string,
  argv: string[],
): Promise<{ code: number | null; out: string }> {
  const runtime = runtimeOf(bed.tp.platform.ctx);
  const session = await runtime.shell(id, { argv, tty: false, cols: 80, rows: 24 });
  let out = '';
  session.onData((_stream, data) => (out += data.toString()));
  const code = new Promise<number | null>((resolve) => session.onExit((c) => resolve(c)));
  session.end();
  return { code: await code, out };
}

/** Whether a new connection from the peer machine to port 5000 of the limited one is accepted. */
async function peerConnects(): Promise<boolean> {
  const target = `TCP:${ip}:5000,connect-timeout=3`;
  return (await inMachine(peerId, ['/usr/bin/socat', '-u', 'OPEN:/dev/null', target])).code === 0;
}

/** Runs `argv` on the host; its output, or undefined when it fails. */
const output = (argv: string[]) =>
  promisify(execFile)(argv[0]!, argv.slice(1)).then(
    (r) => r.stdout,
    () => undefined,
  );

/** The connection limit's table in the machine's netns, as nft lists it; undefined if none. */
const netnsTable = () =>
  output([
    'nsenter',
    `--net=/run/netns/${netnsName(machineId)}`,
    'nft',
    'list',
    'table',
    'inet',
    NETNS_TABLE,
  ]);

/** The host's table of the machine's connection limit (runsc machines only). */
const hostTable = () => output(['nft', 'list', 'table', 'ip', `pp_${vethName(machineId)}`]);

beforeAll(async () => {
  if (!canRunMachines) return;
  // Liveness looks at every machine four times a second: were its looks connections,
  // they would take tokens from the ones the connection test counts.
  bed = await startMachineBed('pn', 80, { livenessIntervalMs: 250 });
  const image = await bed.image('limited:1', {
    layers: [
      busyboxLayer([...DEFAULT_APPLETS, 'nc']),
      hostBinariesLayer(['/usr/bin/socat', '/usr/sbin/nft']),
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
  expect((await bed.req('POST', '/v1/apps', { name: 'peer' })).status).toBe(201);
  const peer = await bed.req('POST', '/v1/apps/peer/machines', { image });
  expect(peer.status, JSON.stringify(peer.body)).toBe(201);
  peerId = peer.body.id;
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

  it('newConnectionsPerMinute: exactly n pass, whatever their source; liveness takes none; the machine cannot lift it', async () => {
    // 20 a minute: a token comes back every 3 s, far longer than the test's connections take.
    const put = await bed.req('PUT', N, { bandwidthMbit: null, newConnectionsPerMinute: 20 });
    expect(put.body.appliedTo).toEqual([machineId]);
    // In the machine's netns, where every inbound connection passes whatever its source
    // (this host's br_netfilter would show a host table bridged frames too; others not).
    expect(await netnsTable()).toMatch(/limit conns/);
    expect(await hostTable()).toBeUndefined();
    // Liveness looks at the machine 8 times meanwhile; were they connections, the host's
    // 19 below would not all pass.
    const since = Date.now();
    await new Promise((r) => setTimeout(r, 2000));
    const seen = (await bed.req('GET', `/v1/machines/${machineId}`)).body;
    expect(seen.liveness).toBe('listening');
    expect(Date.parse(seen.livenessAt)).toBeGreaterThan(since + 1000);
    // One from a machine on the same bridge (its frames never reach the host's IP hooks
    // unless the host passes bridged traffic to them): it counts, as every other does.
    expect(await peerConnects()).toBe(true);
    // The rest at once, so the bucket refills nothing meanwhile; the backlog (512) holds them.
    const t0 = performance.now();
    const rest = await Promise.all(Array.from({ length: 19 }, () => connects()));
    console.log(`policy: 19 connections in ${Math.round(performance.now() - t0)} ms`);
    expect(rest.filter(Boolean).length).toBe(19);
    expect(await connects()).toBe(false);
    expect(await peerConnects()).toBe(false);
    // The machine's root has no CAP_NET_ADMIN over its own netns: the rules stay.
    for (const argv of [
      ['/usr/sbin/nft', 'list', 'ruleset'],
      ['/usr/sbin/nft', 'flush', 'ruleset'],
    ]) {
      const run = await inMachine(machineId, argv);
      expect(run.code, run.out).not.toBe(0);
      expect(run.out).toMatch(/Operation not permitted/);
    }
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
    expect(await netnsTable()).toMatch(/limit conns/);
    const lifted = await bed.req('PUT', N, { bandwidthMbit: null, newConnectionsPerMinute: null });
    expect(lifted.body).toMatchObject({ bandwidthMbit: null, newConnectionsPerMinute: null });
    expect(lifted.body.reason).toBeUndefined();
    expect(await download()).toBeLessThan(IDEAL_S / 2);
    expect(await netnsTable()).toBeUndefined();
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
