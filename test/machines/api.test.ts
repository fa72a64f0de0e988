/**
 * Machines through the API, on the real local runtime: images from a real local OCI
 * registry (busybox images built by the test), isolated processes on the platform bridge,
 * create with and without waiting, the start errors of spec 7.3 from real causes, the
 * actions, wait, logs with a cursor, and the volume rule.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  busyboxLayer,
  DEFAULT_APPLETS,
  pushImage,
} from '../../src/runtime/images/build.test-helper.js';
import { startRegistry, type TestRegistry } from '../helpers/registry.js';
import http from 'node:http';
import { readdir, readFile } from 'node:fs/promises';
import {
  restartTestPlatform,
  startTestPlatform,
  type TestOrg,
  type TestPlatform,
} from '../helpers/platform.js';
import { waitFor } from '../databases/helpers.js';
import { freeMachineCidr, removeMachinesNetwork } from './bed.js';

let registry: TestRegistry;
let tp: TestPlatform;
let org: TestOrg;
let web: string;
let crashy: string;
let silent: string;
let probe: string;

const req = (method: string, p: string, body?: unknown, token = org.token) =>
  tp.request(method, p, { token, body });

const root = process.getuid?.() === 0;

/** A bridge and network of this test file's own (removed at the end), so runs do not share one. */
const net = { bridge: `pm${process.pid % 100000}`, cidr: '' };
function platformConfig() {
  // The registry on 127.0.0.1 is trusted explicitly: pulls still go through the guard.
  return {
    machinesBridge: net.bridge,
    machinesCidr: net.cidr,
    trustedRegistries: [registry.host],
  };
}

/** A GET with a Host header of our choosing (fetch may not set Host). */
function viaProxy(
  path: string,
  host = 'site.127.0.0.1',
): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const r = http.get(`${tp.url}${path}`, { headers: { host } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
    });
    r.on('error', reject);
  });
}

/** Pids of a machine's processes: the members of its cgroup, found through /proc. */
async function pidsOfMachine(machineId: string): Promise<number[]> {
  const out: number[] = [];
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const cg = await readFile(`/proc/${entry}/cgroup`, 'utf8').catch(() => '');
    if (cg.includes(`/${machineId}\n`) || cg.endsWith(`/${machineId}`)) out.push(Number(entry));
  }
  return out;
}

beforeAll(async () => {
  if (!root) return;
  net.cidr = await freeMachineCidr(100);
  registry = await startRegistry();
  const page = { path: 'www/index.html', content: 'hello from a machine\n' };
  await pushImage(registry.url, 'web:1', {
    layers: [busyboxLayer(), [{ path: 'www/' }, page]],
    config: { Cmd: ['/bin/httpd', '-f', '-p', '3000', '-h', '/www'], Env: ['GREETING=image'] },
  });
  await pushImage(registry.url, 'crashy:1', {
    layers: [busyboxLayer()],
    config: { Cmd: ['/bin/sh', '-c', 'echo starting; echo doomed >&2; exit 3'] },
  });
  await pushImage(registry.url, 'silent:1', {
    layers: [busyboxLayer()],
    config: { Cmd: ['/bin/sleep', '3600'] },
  });
  await pushImage(registry.url, 'probe:1', {
    layers: [busyboxLayer([...DEFAULT_APPLETS, 'nc', 'printf'])],
    config: { Cmd: ['/bin/sleep', '3600'] },
  });
  probe = `${registry.host}/probe:1`;
  web = `${registry.host}/web:1`;
  crashy = `${registry.host}/crashy:1`;
  silent = `${registry.host}/silent:1`;
  tp = await startTestPlatform(platformConfig());
  org = await tp.createOrg();
  expect((await req('POST', '/v1/apps', { name: 'site' })).status).toBe(201);
}, 120_000);

afterAll(async () => {
  if (!root) return;
  // Every machine of every app, also when a test failed before destroying its own.
  for (const a of (await req('GET', '/v1/apps')).body ?? []) {
    for (const m of (await req('GET', `/v1/apps/${a.name}/machines`)).body ?? []) {
      await req('POST', `/v1/machines/${m.id}/destroy`);
    }
  }
  await tp?.close();
  await registry?.stop();
  await removeMachinesNetwork(net.bridge, net.cidr);
});

describe.skipIf(!root)('machines', () => {
  let id: string;

  it('creates a machine, waits until it answers on its port, and answers bootMs', async () => {
    const res = await req('POST', '/v1/apps/site/machines', {
      image: web,
      env: { GREETING: 'env' },
    });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    expect(res.body).toMatchObject({
      appName: 'site',
      desiredState: 'running',
      observedState: 'running',
      region: 'local',
      config: { image: web, vcpus: 1, memoryMb: 512, internalPort: 3000, console: false },
    });
    expect(res.body.bootMs).toBeGreaterThan(0);
    expect(res.body.privateIp).toMatch(/^10\./);
    id = res.body.id;
    const page = await fetch(`http://${res.body.privateIp}:3000/index.html`);
    expect(await page.text()).toBe('hello from a machine\n');
  });

  it('lists and reads it', async () => {
    expect(
      (await req('GET', '/v1/apps/site/machines')).body.map((m: { id: string }) => m.id),
    ).toEqual([id]);
    expect((await req('GET', `/v1/machines/${id}`)).body.observedState).toBe('running');
    expect((await req('GET', '/v1/machines/mch-nope')).status).toBe(404);
  });

  it('stops, starts, suspends and resumes it; a repeated action is a no-op', async () => {
    const stopped = await req('POST', `/v1/machines/${id}/stop`);
    expect(stopped.status).toBe(200);
    expect(stopped.body).toMatchObject({ desiredState: 'stopped', observedState: 'stopped' });
    expect((await req('POST', `/v1/machines/${id}/stop`)).body.observedState).toBe('stopped');
    const suspendStopped = await req('POST', `/v1/machines/${id}/suspend`);
    expect(suspendStopped.status).toBe(409);
    const started = await req('POST', `/v1/machines/${id}/start`);
    expect(started.body.observedState).toBe('running');
    const suspended = await req('POST', `/v1/machines/${id}/suspend`);
    expect(suspended.body.observedState).toBe('suspended');
    const resumed = await req('POST', `/v1/machines/${id}/start`);
    expect(resumed.body.observedState).toBe('running');
    const ip = resumed.body.privateIp;
    expect(await (await fetch(`http://${ip}:3000/index.html`)).text()).toContain('hello');
  });

  it('answers on the app default address through the proxy, and wakes a suspended machine', async () => {
    const res = await viaProxy('/index.html');
    expect(res.status).toBe(200);
    expect(res.text).toBe('hello from a machine\n');
    expect((await viaProxy('/index.html', 'nope.127.0.0.1')).status).toBe(404);
    // The API itself still answers on its own host.
    expect((await fetch(`${tp.url}/healthz`)).status).toBe(200);
    expect((await req('POST', `/v1/machines/${id}/suspend`)).body.observedState).toBe('suspended');
    const woken = await viaProxy('/index.html');
    expect(woken.status).toBe(200);
    expect((await req('GET', `/v1/machines/${id}`)).body.observedState).toBe('running');
    // The proxy keeps the app's machine list a moment, but a stop drops it at once: the
    // next request finds no running machine (503), not the stopped one's address (502).
    expect((await req('POST', `/v1/machines/${id}/stop`)).body.observedState).toBe('stopped');
    const stopped = await viaProxy('/index.html');
    expect(stopped.status, stopped.text).toBe(503);
    expect((await req('POST', `/v1/machines/${id}/start`)).body.observedState).toBe('running');
    expect((await viaProxy('/index.html')).status).toBe(200);
  });

  it('creates without waiting (202) and waits on the wait route', async () => {
    const res = await req('POST', '/v1/apps/site/machines?wait=false', {
      image: silent,
      readiness: 'boot',
    });
    expect(res.status).toBe(202);
    expect(['requested', 'starting', 'running']).toContain(res.body.observedState);
    const waited = await req('GET', `/v1/machines/${res.body.id}/wait?state=running&timeout=60`);
    expect(waited.status).toBe(200);
    expect(waited.body.observedState).toBe('running');
    const timeout = await req('GET', `/v1/machines/${res.body.id}/wait?state=stopped&timeout=1`);
    expect(timeout.status).toBe(408);
    expect(timeout.body.code).toBe('wait-timeout');
    const gone = await req('POST', `/v1/machines/${res.body.id}/destroy`);
    expect(gone.body.observedState).toBe('deleted');
  });

  it('answers guest-exited when the process ends during start, with its boot log', async () => {
    const res = await req('POST', '/v1/apps/site/machines', { image: crashy });
    expect(res.status).toBe(503);
    expect(res.body.code).toBe('guest-exited');
    expect(res.body.machine.observedState).toBe('failed');
    expect(res.body.machine.createBootLog).toContain('doomed');
    await req('POST', `/v1/machines/${res.body.machine.id}/destroy`);
  });

  it('answers port-timeout when the port never opens', async () => {
    const res = await req('POST', '/v1/apps/site/machines', {
      image: silent,
      healthCheck: { maxWaitMs: 1500 },
    });
    expect(res.status).toBe(503);
    expect(res.body.code).toBe('port-timeout');
    await req('POST', `/v1/machines/${res.body.machine.id}/destroy`);
  });

  it('answers create-failed for an image that does not exist, and build-not-found', async () => {
    const res = await req('POST', '/v1/apps/site/machines', { image: `${registry.host}/nope:1` });
    expect(res.status).toBe(503);
    expect(res.body.code).toBe('create-failed');
    expect(res.body.error).toMatch(/not-found/);
    const destroyed = await req('POST', `/v1/machines/${res.body.machine.id}/destroy`);
    expect(destroyed.status, JSON.stringify(destroyed.body)).toBe(200);
    const build = await req('POST', '/v1/apps/site/machines', { image: 'build:b-123' });
    expect(build.status).toBe(404);
    expect(build.body.code).toBe('build-not-found');
  });

  it('keeps the console output and follows it with a cursor', async () => {
    const talker = await req('POST', '/v1/apps/site/machines', {
      image: silent,
      readiness: 'boot',
      start: 'echo hello-log; echo oops >&2; sleep 3600',
    });
    expect(talker.status).toBe(201);
    const logs = await waitFor(async () => {
      const r = await req('GET', '/v1/apps/site/logs?limit=50');
      return r.body.entries?.length >= 2 ? r.body : undefined;
    }, 'log entries');
    expect(logs.entries).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ machineId: talker.body.id, stream: 'stdout', text: 'hello-log' }),
        expect.objectContaining({ machineId: talker.body.id, stream: 'stderr', text: 'oops' }),
      ]),
    );
    await req('POST', `/v1/machines/${talker.body.id}/destroy`);
    expect(typeof logs.cursor).toBe('string');
    const next = await req('GET', `/v1/apps/site/logs?cursor=${logs.cursor}`);
    expect(next.status).toBe(200);
    const bad = await req('GET', '/v1/apps/site/logs?cursor=not-a-cursor');
    expect(bad.status).toBe(400);
  });

  it('follows several machines with a small limit, losing and repeating no line', async () => {
    expect((await req('POST', '/v1/apps', { name: 'chatty' })).status).toBe(201);
    const ids: string[] = [];
    for (const who of ['a', 'b']) {
      const m = await req('POST', '/v1/apps/chatty/machines', {
        image: silent,
        readiness: 'boot',
        start: `for i in 1 2 3 4 5; do echo ${who}$i; done; sleep 3600`,
      });
      ids.push(m.body.id);
    }
    await waitFor(async () => {
      const r = await req('GET', '/v1/apps/chatty/logs?limit=100');
      return r.body.entries?.length >= 10 ? true : undefined;
    }, 'ten lines');
    const seen: string[] = [];
    let cursor = '';
    for (let i = 0; i < 10; i++) {
      const page = await req(
        'GET',
        `/v1/apps/chatty/logs?limit=3${cursor ? `&cursor=${cursor}` : ''}`,
      );
      // A first call without a cursor answers the last lines: follow from the start instead.
      if (!cursor) {
        cursor = Buffer.from(JSON.stringify({ [ids[0]!]: 0, [ids[1]!]: 0 })).toString('base64url');
        continue;
      }
      seen.push(...page.body.entries.map((e: { text: string }) => e.text));
      cursor = page.body.cursor;
      if (page.body.entries.length === 0) break;
    }
    expect([...seen].sort()).toEqual(['a1', 'a2', 'a3', 'a4', 'a5', 'b1', 'b2', 'b3', 'b4', 'b5']);
    for (const id of ids) await req('POST', `/v1/machines/${id}/destroy`);
  });

  it('restarts a crashed machine by its policy: always by default, never, on-failure with retries', async () => {
    const make = async (restart?: object) => {
      const res = await req('POST', '/v1/apps/site/machines', {
        image: silent,
        readiness: 'boot',
        start: 'sleep 1; exit 7',
        ...(restart ? { restart } : {}),
      });
      expect(res.status, JSON.stringify(res.body)).toBe(201);
      return res.body.id as string;
    };
    const [always, never, once] = await Promise.all([
      make(),
      make({ policy: 'never' }),
      make({ policy: 'on-failure', retries: 1 }),
    ]);
    const machine = async (mid: string) => (await req('GET', `/v1/machines/${mid}`)).body;
    await waitFor(async () => (await machine(always)).restarts >= 2, 'two restarts', 30_000);
    const n = await waitFor(async () => {
      const m = await machine(never);
      return m.observedState === 'failed' ? m : undefined;
    }, 'the never machine to fail');
    expect(n).toMatchObject({ restarts: 0, createError: 'the process exited with code 7' });
    const o = await waitFor(
      async () => {
        const m = await machine(once);
        return m.observedState === 'failed' ? m : undefined;
      },
      'the on-failure machine to give up',
      30_000,
    );
    expect(o.restarts).toBe(1);
    for (const mid of [always, never, once]) await req('POST', `/v1/machines/${mid}/destroy`);
  });

  it('sleeps by its policy and wakes on the next request through the proxy', async () => {
    await req('POST', '/v1/apps', { name: 'napper' });
    await req('POST', '/v1/apps', { name: 'halter' });
    await req('POST', '/v1/apps', { name: 'cruncher' });
    const [nap, halt, busy] = await Promise.all([
      req('POST', '/v1/apps/napper/machines', {
        image: web,
        suspendPolicy: { mode: 'suspend', idleSeconds: 10 },
      }),
      req('POST', '/v1/apps/halter/machines', {
        image: web,
        suspendPolicy: { mode: 'stop', idleSeconds: 10 },
      }),
      // No requests, but a share of a CPU (copies in bursts, then rests): never idle.
      req('POST', '/v1/apps/cruncher/machines', {
        image: silent,
        readiness: 'boot',
        start:
          'while true; do dd if=/dev/urandom of=/dev/null bs=64k count=400 2>/dev/null; sleep 0.3; done',
        suspendPolicy: { mode: 'suspend', idleSeconds: 10 },
      }),
    ]);
    try {
      expect(busy.status).toBe(201);
      expect(nap.status).toBe(201);
      expect(halt.status).toBe(201);
      const state = async (mid: string) => (await req('GET', `/v1/machines/${mid}`)).body;
      await waitFor(
        async () =>
          (await state(nap.body.id)).observedState === 'suspended' &&
          (await state(halt.body.id)).observedState === 'stopped',
        'both to sleep',
        45_000,
      );
      expect((await state(halt.body.id)).desiredState).toBe('running');
      expect((await state(busy.body.id)).observedState).toBe('running');
      for (const [app, mid] of [
        ['napper', nap.body.id],
        ['halter', halt.body.id],
      ]) {
        const res = await viaProxy('/index.html', `${app}.127.0.0.1`);
        expect(res.status).toBe(200);
        expect(res.text).toContain('hello');
        expect((await state(mid)).observedState).toBe('running');
      }
    } finally {
      // Whatever happened, nothing of this test keeps running (the cruncher spends CPU).
      for (const m of [nap, halt, busy])
        if (m.body?.id) await req('POST', `/v1/machines/${m.body.id}/destroy`);
    }
  }, 90_000);

  it('makes a volume with volumeGb and mounts it at /data', async () => {
    await req('POST', '/v1/apps', { name: 'keeper' });
    const res = await req('POST', '/v1/apps/keeper/machines', {
      image: silent,
      readiness: 'boot',
      volumeGb: 1,
      start: 'echo kept > /data/proof; sleep 3600',
    });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    const vols = (await req('GET', '/v1/volumes')).body;
    const vol = vols.find((v: { name: string }) => v.name === 'keeper-data');
    expect(vol).toMatchObject({ appName: 'keeper', sizeGb: 1, mountPath: '/data' });
    const { pool } = await tp.platform.ctx.pool.get();
    const info = await pool.info(`v-${vol.id.replace(/^vol-/, '')}`);
    await waitFor(
      async () => (await readFile(`${info!.path}/proof`, 'utf8').catch(() => '')) === 'kept\n',
      'the file written on the volume',
    );
    const second = await req('POST', '/v1/apps/keeper/machines', { image: silent });
    expect(second.status).toBe(409);
    expect(second.body.code).toBe('volume-needs-single-machine');
    await req('POST', `/v1/machines/${res.body.id}/destroy`);
  });

  it('runs exactly one machine for an app with a volume', async () => {
    await req('POST', '/v1/volumes', { name: 'site-data' });
    await req('POST', '/v1/apps/site/attach', { volume: 'site-data' });
    const res = await req('POST', '/v1/apps/site/machines', { image: web });
    expect(res.status).toBe(409);
    expect(res.body.code).toBe('volume-needs-single-machine');
    await req('POST', '/v1/apps/site/detach', { volume: 'site-data' });
  });

  it('keeps running across a restart of pier, and is started again if it died meanwhile', async () => {
    const before = (await req('GET', `/v1/machines/${id}`)).body;
    tp = await restartTestPlatform(tp, platformConfig());
    expect((await req('GET', `/v1/machines/${id}`)).body.observedState).toBe('running');
    expect(await (await fetch(`http://${before.privateIp}:3000/index.html`)).text()).toContain(
      'hello',
    );
    // Killed while pier is down: the next start brings it back, as it is wanted running.
    await tp.platform.close();
    const pids = await pidsOfMachine(id);
    for (const pid of pids) process.kill(pid, 'SIGKILL');
    await waitFor(async () => (await pidsOfMachine(id)).length === 0, 'the machine to die');
    tp = await startTestPlatform(platformConfig(), {}, { db: tp.db, dataDir: tp.dataDir });
    expect((await req('GET', `/v1/machines/${id}`)).body.observedState).toBe('running');
    expect(await (await fetch(`http://${before.privateIp}:3000/index.html`)).text()).toContain(
      'hello',
    );
  }, 90_000);

  it('books its running time as machine_running_seconds usage', async () => {
    const { meterRunning } = await import('../../src/services/machines/metering.js');
    await new Promise((r) => setTimeout(r, 1100));
    await meterRunning(tp.platform.ctx.db);
    const usage = await req('GET', '/v1/usage');
    expect(usage.status).toBe(200);
    const mine = usage.body.events.filter(
      (e: { kind: string }) => e.kind === 'machine_running_seconds',
    );
    expect(mine.length).toBeGreaterThan(0);
    const total = mine.reduce((n: number, e: { quantity: number }) => n + e.quantity, 0);
    expect(total).toBeGreaterThan(1);
    expect(usage.body).toMatchObject({ truncated: false, limit: 1000 });
    const bad = await req('GET', '/v1/usage?from=2026-02-01T00:00:00Z&to=2026-01-01T00:00:00Z');
    expect(bad.status).toBe(400);
  });

  it('destroys the machines of an app when the app is deleted', async () => {
    expect((await req('POST', '/v1/apps', { name: 'doomed' })).status).toBe(201);
    const res = await req('POST', '/v1/apps/doomed/machines', { image: web });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    const doomed: string = res.body.id;
    expect((await pidsOfMachine(doomed)).length).toBeGreaterThan(0);
    expect((await req('DELETE', '/v1/apps/doomed')).status).toBe(204);
    expect(await pidsOfMachine(doomed)).toEqual([]);
    expect((await req('GET', `/v1/machines/${doomed}`)).status).toBe(404);
    expect((await req('GET', '/v1/apps/doomed')).status).toBe(404);
    // The other app's machine is untouched.
    expect((await req('GET', `/v1/machines/${id}`)).body.observedState).toBe('running');
    // A create and a destroy (stop grace included) under a loaded CI host took over 30 s twice.
  }, 90_000);

  it('walls organizations apart: a machine reaches its own organization’s machines only', async () => {
    const ip: string = (await req('GET', `/v1/machines/${id}`)).body.privateIp;
    const other = await tp.createOrg();
    /** A machine of app `app` that fetches the web machine's page once and prints it. */
    const fetchFrom = async (app: string, token: string) => {
      expect((await req('POST', '/v1/apps', { name: app }, token)).status).toBe(201);
      const m = await req(
        'POST',
        `/v1/apps/${app}/machines`,
        {
          image: probe,
          readiness: 'boot',
          start: `printf 'GET /index.html HTTP/1.0\\r\\n\\r\\n' | nc -w 2 ${ip} 3000; echo probe-rc=$?; sleep 3600`,
        },
        token,
      );
      expect(m.status, JSON.stringify(m.body)).toBe(201);
      const text = await waitFor(async () => {
        const r = await req('GET', `/v1/apps/${app}/logs?limit=50`, undefined, token);
        const all = (r.body.entries ?? []).map((e: { text: string }) => e.text).join('\n');
        return all.includes('probe-rc=') ? all : undefined;
      }, 'the probe');
      await req('POST', `/v1/machines/${m.body.id}/destroy`, undefined, token);
      return text;
    };
    const [same, foreign] = await Promise.all([
      fetchFrom('probe-same', org.token),
      fetchFrom('probe-foreign', other.token),
    ]);
    expect(same).toContain('hello from a machine');
    expect(foreign).not.toContain('hello from a machine');
    expect(foreign).toContain('probe-rc=1');
  }, 60_000);

  it('destroys it: gone from the list, the state says deleted', async () => {
    const res = await req('POST', `/v1/machines/${id}/destroy`);
    expect(res.body.observedState).toBe('deleted');
    expect((await req('GET', '/v1/apps/site/machines')).body).toEqual([]);
  });
});
