/**
 * Deploys, releases and rollback on a real platform (CONTRACT 7, issue #25 items 5-6):
 * images from a local registry run as real machines behind the proxy. A rolling deploy of
 * a 2-machine app under a steady stream of requests fails none of them; a deploy whose
 * image crashes ends `error` and leaves the old release serving with no machine behind;
 * an app with a volume is stopped first; staged secrets wait for the next deploy; every
 * code of spec 7.4; and the keys an attacker would hold.
 */
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { busyboxLayer } from '../../src/runtime/images/build.test-helper.js';
import { keyOf } from '../edge/edge.test-helper.js';
import { canRunMachines, startMachineBed, type MachineBed } from '../machines/bed.js';

let bed: MachineBed;
const images: Record<string, string> = {};

/** An image whose httpd serves `text` at / and the env var GREETING at /env.txt. */
function webImage(text: string) {
  return {
    layers: [busyboxLayer(), [{ path: 'srv/index.html', content: text }]],
    config: {
      Cmd: ['/bin/sh', '-c', 'echo "$GREETING" > /srv/env.txt; exec httpd -f -p 8080 -h /srv'],
    },
  };
}

const keepAlive = new http.Agent({ keepAlive: true, maxSockets: 16 });

function viaProxy(app: string, path = '/'): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const r = http.get(
      `${bed.tp.url}${path}`,
      { headers: { host: `${app}.127.0.0.1` }, agent: keepAlive },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text: text.trim() }));
      },
    );
    r.on('error', reject);
  });
}

/** Polls the deploy until it ends; answers its final record. */
async function settled(id: string, ms = 120_000): Promise<any> {
  const end = Date.now() + ms;
  for (;;) {
    const d = await bed.req('GET', `/v1/deploys/${id}`);
    expect(d.status).toBe(200);
    if (d.body.status === 'done' || d.body.status === 'error') return d.body;
    if (Date.now() > end) throw new Error(`deploy ${id} still ${d.body.status} (${d.body.step})`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

async function deploy(app: string, body: Record<string, unknown>): Promise<any> {
  const res = await bed.req('POST', `/v1/apps/${app}/deploys`, body);
  expect(res.status, JSON.stringify(res.body)).toBe(202);
  expect(res.body).toMatchObject({ app, status: 'pending' });
  return settled(res.body.id);
}

async function machinesOf(app: string): Promise<any[]> {
  return (await bed.req('GET', `/v1/apps/${app}/machines`)).body;
}

/** Requests through the proxy from `clients` loops until stopped; counts what failed. */
function hammer(app: string, clients: number) {
  let stop = false;
  const seen: string[] = [];
  const failures: string[] = [];
  const loops = Array.from({ length: clients }, async () => {
    while (!stop) {
      try {
        const r = await viaProxy(app);
        if (r.status !== 200) failures.push(`${r.status} ${r.text}`);
        else seen.push(r.text);
      } catch (err) {
        failures.push(String(err));
      }
    }
  });
  return {
    seen,
    failures,
    async end() {
      stop = true;
      await Promise.all(loops);
    },
  };
}

// httpd as PID 1 ignores SIGTERM: a short kill timeout keeps retiring machines quick.
const cfg = { internalPort: 8080, memoryMb: 128, killTimeoutS: 1 };

beforeAll(async () => {
  if (!canRunMachines) return;
  bed = await startMachineBed('dp', 90);
  images.v1 = await bed.image('web:1', webImage('v1'));
  images.v2 = await bed.image('web:2', webImage('v2'));
  images.v3 = await bed.image('web:3', webImage('v3'));
  images.crash = await bed.image('crash:1', {
    layers: [busyboxLayer()],
    config: { Cmd: ['/bin/sh', '-c', 'echo dying; exit 3'] },
  });
  for (const name of ['site', 'vol', 'one', 'secrets']) {
    expect((await bed.req('POST', '/v1/apps', { name })).status).toBe(201);
  }
}, 120_000);

afterAll(async () => {
  keepAlive.destroy();
  await bed?.close();
}, 120_000);

describe.skipIf(!canRunMachines)('deploys', () => {
  it('deploys an image: release v1 live, served through the proxy', async () => {
    const d = await deploy('site', { image: images.v1, config: cfg });
    expect(d).toMatchObject({ status: 'done', release: 1, strategy: 'rolling' });
    expect(await viaProxy('site')).toEqual({ status: 200, text: 'v1' });
    const releases = (await bed.req('GET', '/v1/apps/site/releases')).body;
    expect(releases).toHaveLength(1);
    expect(releases[0]).toMatchObject({
      version: 1,
      status: 'live',
      image: images.v1,
      deploy: d.id,
      config: { internalPort: 8080, memoryMb: 128 },
    });
    expect(releases[0].imageDigest).toMatch(/^sha256:[0-9a-f]{64}$/);
    // Pinned: the release's machines run the digest, not a tag that may move.
    expect(releases[0].config.image).toContain(`@${releases[0].imageDigest}`);
    expect(releases[0].liveAt).toBeDefined();
  }, 120_000);

  it('rolls a 2-machine app under steady traffic with no failed request', async () => {
    // A second machine, made by hand: the deploy replaces it too.
    const m = await bed.req('POST', '/v1/apps/site/machines', { image: images.v1, ...cfg });
    expect(m.status).toBe(201);
    const load = hammer('site', 6);
    await new Promise((r) => setTimeout(r, 500));
    const d = await deploy('site', { image: images.v2 });
    await new Promise((r) => setTimeout(r, 500));
    await load.end();
    expect(d).toMatchObject({ status: 'done', release: 2 });
    expect(load.failures).toEqual([]);
    expect(load.seen.length).toBeGreaterThan(50);
    expect(load.seen.at(-1)).toBe('v2');
    // Both old machines are gone; two new ones of the same config serve.
    const after = await machinesOf('site');
    expect(after).toHaveLength(2);
    expect(after.every((x) => x.config.image.includes('@sha256:'))).toBe(true);
    for (let i = 0; i < 4; i++) expect((await viaProxy('site')).text).toBe('v2');
    const releases = (await bed.req('GET', '/v1/apps/site/releases')).body;
    expect(releases.map((r: any) => [r.version, r.status])).toEqual([
      [2, 'live'],
      [1, 'superseded'],
    ]);
    // The config was kept from the live release (no config in the body).
    expect(releases[0].config).toMatchObject(cfg);
  }, 180_000);

  it('a deploy whose image crashes ends error; the old release serves on, nothing left', async () => {
    const before = (await machinesOf('site')).map((m) => m.id).sort();
    const d = await deploy('site', { image: images.crash, strategy: 'immediate' });
    expect(d.status).toBe('error');
    expect(d.error).toMatch(/did not start/);
    expect(d.release).toBe(3);
    expect((await machinesOf('site')).map((m) => m.id).sort()).toEqual(before);
    expect(await viaProxy('site')).toEqual({ status: 200, text: 'v2' });
    const releases = (await bed.req('GET', '/v1/apps/site/releases')).body;
    expect(releases.map((r: any) => [r.version, r.status])).toEqual([
      [3, 'failed'],
      [2, 'live'],
      [1, 'superseded'],
    ]);
  }, 180_000);

  it('answers every rollback code, then rolls back to the release before', async () => {
    const rb = (body: unknown, app = 'site') => bed.req('POST', `/v1/apps/${app}/rollback`, body);
    expect((await rb({ version: 99 })).body.code).toBe('release-not-found');
    expect((await rb({ version: 2 })).body.code).toBe('rollback-target-current');
    expect((await rb({ version: 3 })).body.code).toBe('rollback-target-never-live');
    expect((await rb({ version: 0 })).status).toBe(400);
    // No earlier live release: an app with one release, and an app with none.
    await deploy('one', { image: images.v3, config: cfg });
    expect((await rb({}, 'one')).body.code).toBe('no-previous-release');
    expect((await rb({}, 'vol')).body.code).toBe('no-previous-release');
    expect((await rb({}, 'nowhere')).status).toBe(404);

    const back = await bed.req('POST', '/v1/apps/site/rollback', {});
    expect(back.status).toBe(202);
    expect(back.body).toMatchObject({ rollbackOf: 1, image: images.v1 });
    // One deploy at a time: a second one now is refused.
    const second = await bed.req('POST', '/v1/apps/site/deploys', { image: images.v2 });
    expect([second.status, second.body.code]).toEqual([409, 'deploy-in-flight']);
    expect((await rb({})).body.code).toBe('deploy-in-flight');
    const done = await settled(back.body.id);
    expect(done).toMatchObject({ status: 'done', release: 4 });
    expect((await viaProxy('site')).text).toBe('v1');
    // v4 runs v1's image: going back to v1 is the same build.
    expect((await rb({ version: 1 })).body.code).toBe('rollback-same-build');
    const releases = (await bed.req('GET', '/v1/apps/site/releases')).body;
    expect(releases[0]).toMatchObject({ version: 4, status: 'live' });
    expect(releases[0].imageDigest).toBe(releases.find((r: any) => r.version === 1).imageDigest);
  }, 180_000);

  it('refuses a rollback whose config or image can no longer be used', async () => {
    const { ctx } = bed.tp.platform;
    const app = await ctx.db
      .selectFrom('apps')
      .select('id')
      .where('name', '=', 'site')
      .executeTakeFirstOrThrow();
    const v2 = await ctx.db
      .selectFrom('releases')
      .selectAll()
      .where('app_id', '=', app.id)
      .where('version', '=', 2)
      .executeTakeFirstOrThrow();
    // A config recorded under older rules (memory below today's floor).
    await ctx.db
      .updateTable('releases')
      .set({ config: JSON.stringify({ ...v2.config, memoryMb: 1 }) })
      .where('id', '=', v2.id)
      .execute();
    const needs = await bed.req('POST', '/v1/apps/site/rollback', { version: 2 });
    expect([needs.status, needs.body.code]).toEqual([409, 'rollback-needs-machine-config']);
    // An image neither kept nor in its registry any more.
    await ctx.db
      .updateTable('releases')
      .set({
        config: JSON.stringify(v2.config),
        image_digest: `sha256:${'0'.repeat(64)}`,
      })
      .where('id', '=', v2.id)
      .execute();
    const gone = await bed.req('POST', '/v1/apps/site/rollback', { version: 2 });
    expect([gone.status, gone.body.code]).toEqual([409, 'release-artifact-gone']);
    await ctx.db
      .updateTable('releases')
      .set({ image_digest: v2.image_digest })
      .where('id', '=', v2.id)
      .execute();
  }, 60_000);

  it('an app with a volume is stopped first and keeps one machine', async () => {
    const first = await deploy('vol', { image: images.v1, config: { ...cfg, volumeGb: 1 } });
    expect(first.status).toBe('done');
    expect(await machinesOf('vol')).toHaveLength(1);
    const d = await deploy('vol', { image: images.v2 });
    expect(d).toMatchObject({ status: 'done', release: 2 });
    const after = await machinesOf('vol');
    expect(after).toHaveLength(1);
    expect((await viaProxy('vol')).text).toBe('v2');
    // A failing deploy starts the old machine again.
    const bad = await deploy('vol', { image: images.crash });
    expect(bad.status).toBe('error');
    expect((await machinesOf('vol')).map((m) => m.id)).toEqual(after.map((m) => m.id));
    expect((await viaProxy('vol')).text).toBe('v2');
  }, 240_000);

  it('staged secrets wait for the next deploy; staged false rolls the app at once', async () => {
    const put = (GREETING: string, staged: boolean) =>
      bed.req('PUT', '/v1/apps/secrets/secrets', { secrets: { GREETING }, staged });
    expect((await put('one', true)).status).toBe(200);
    await deploy('secrets', { image: images.v1, config: cfg });
    expect((await viaProxy('secrets', '/env.txt')).text).toBe('one');
    expect((await put('two', true)).status).toBe(200);
    // A restart of the machine keeps the release's values.
    const [m] = await machinesOf('secrets');
    await bed.req('POST', `/v1/machines/${m.id}/stop`);
    await bed.req('POST', `/v1/machines/${m.id}/start`);
    await bed.req('GET', `/v1/machines/${m.id}/wait?state=running`);
    expect((await viaProxy('secrets', '/env.txt')).text).toBe('one');
    const d = await deploy('secrets', { image: images.v2 });
    expect(d.status).toBe('done');
    expect((await viaProxy('secrets', '/env.txt')).text).toBe('two');
    const releases = (await bed.req('GET', '/v1/apps/secrets/releases')).body;
    expect(releases[0].secrets).toEqual(['GREETING']);
    expect(JSON.stringify(releases)).not.toContain('two');

    const now = await put('three', false);
    expect(now.status).toBe(200);
    expect(now.body.restarted).toHaveLength(1);
    const deploys = (await bed.req('GET', '/v1/apps/secrets/deploys')).body;
    await settled(deploys[0].id);
    expect((await viaProxy('secrets', '/env.txt')).text).toBe('three');
    // Rolling back brings back the values the release recorded.
    const back = await bed.req('POST', '/v1/apps/secrets/rollback', { version: 1 });
    expect(back.status).toBe(202);
    await settled(back.body.id);
    expect((await viaProxy('secrets', '/env.txt')).text).toBe('one');
  }, 240_000);

  it('refuses bad bodies, others’ builds and the keys an attacker holds', async () => {
    const bad = await bed.req('POST', '/v1/apps/site/deploys', {
      image: 'UPPER CASE!',
      strategy: 'sideways',
      extra: 1,
    });
    expect(bad.status).toBe(400);
    expect(bad.body.issues.map((i: any) => i.path).sort()).toEqual(['extra', 'strategy']);
    const badRef = await bed.req('POST', '/v1/apps/site/deploys', { image: 'UPPER CASE!' });
    expect([badRef.status, badRef.body.issues?.[0]?.path]).toEqual([400, 'image']);
    expect(
      (await bed.req('POST', '/v1/apps/site/deploys', { image: 'build:bld_nope' })).body.code,
    ).toBe('build-not-found');

    const deploys = (await bed.req('GET', '/v1/apps/site/deploys')).body;
    const other = await bed.tp.createOrg();
    const as = (token: string) => ({
      create: () => bed.req('POST', '/v1/apps/site/deploys', { image: images.v2 }, token),
      rollback: () => bed.req('POST', '/v1/apps/site/rollback', {}, token),
      list: () => bed.req('GET', '/v1/apps/site/deploys', undefined, token),
      get: () => bed.req('GET', `/v1/deploys/${deploys[0].id}`, undefined, token),
      releases: () => bed.req('GET', '/v1/apps/site/releases', undefined, token),
    });
    // Another organization: exactly like a missing app or deploy.
    const them = as(other.token);
    for (const r of [await them.create(), await them.rollback(), await them.list()])
      expect([r.status, r.body.code]).toEqual([404, 'not-found']);
    expect((await them.get()).status).toBe(404);
    // Read-only key: reads yes, writes no.
    const reader = as(await keyOf(bed, { scopes: ['read'] }));
    expect((await reader.create()).body.code).toBe('token-scope');
    expect((await reader.rollback()).body.code).toBe('token-scope');
    expect((await reader.releases()).status).toBe(200);
    // Production agent: reads yes, writes no.
    const prod = as(await keyOf(bed, { agent: { class: 'production', apps: ['site'] } }));
    expect((await prod.create()).body.code).toBe('agent-token-production-readonly');
    expect((await prod.rollback()).body.code).toBe('agent-token-production-readonly');
    expect((await prod.releases()).status).toBe(200);
    expect((await prod.get()).status).toBe(200);
    // An agent limited to another app: nothing of this one.
    const limited = as(await keyOf(bed, { agent: { class: 'twin', apps: ['one'] } }));
    for (const r of [await limited.create(), await limited.releases(), await limited.get()])
      expect(r.body.code).toBe('agent-token-app-scope');
    // A revoked key.
    const key = await bed.req('POST', '/v1/tokens', { name: 'gone' });
    await bed.req('DELETE', `/v1/tokens/${key.body.id}`);
    expect((await as(key.body.token).list()).status).toBe(401);
  }, 60_000);
});
