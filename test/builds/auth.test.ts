/**
 * Who may call the builds routes (CONTRACT 7, issue #25 "a read-only key, an app-limited
 * agent token, a production agent token on every route"): sources, detect, builds
 * create, list, get and logs, each with a read-only key, an agent token limited to
 * another app, a production agent token, another organization's key (answered exactly
 * like a missing app or build) and a revoked key. No builder is needed: the answers are
 * the routes' own (a build made here fails at once, "builds no images").
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, type TestOrg, type TestPlatform } from '../helpers/platform.js';
import { sourceArchive, uploadSource } from './archive.js';

let tp: TestPlatform;
let org: TestOrg;
let other: TestOrg;
let sourceId: string;
let buildId: string;

const APP = 'bauth';

/** One builds route for the app `app` and the build `id`: its name and how to call it. */
interface Route {
  name: string;
  send(token: string): Promise<{ status: number; body: any }>;
}

function routes(app: string, id: string): Route[] {
  const json = (name: string, method: string, p: string, body?: unknown): Route => ({
    name,
    send: (token) => tp.request(method, p, { token, body }),
  });
  return [
    {
      name: 'sources',
      send: (token) => uploadSource(tp.url, token, app, sourceArchive({ Dockerfile: 'FROM x\n' })),
    },
    json('detect', 'POST', `/v1/apps/${app}/detect`, { source: sourceId }),
    json('create', 'POST', `/v1/apps/${app}/builds`, { source: sourceId }),
    json('list', 'GET', `/v1/apps/${app}/builds`),
    json('get', 'GET', `/v1/builds/${id}`),
    json('logs', 'GET', `/v1/builds/${id}/logs`),
  ];
}

const WRITES = new Set(['sources', 'create']);
const READS = new Set(['list', 'get', 'logs']);

async function key(body: Record<string, unknown>): Promise<{ id: string; token: string }> {
  const res = await tp.request('POST', '/v1/tokens', {
    token: org.token,
    body: { name: 'builds-auth', ...body },
  });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return { id: res.body.id, token: res.body.token };
}

/** Status and code of each route for `token`. */
async function answers(token: string) {
  const out: Record<string, [number, string | undefined]> = {};
  for (const r of routes(APP, buildId)) {
    const res = await r.send(token);
    out[r.name] = [res.status, res.body?.code];
  }
  return out;
}

beforeAll(async () => {
  tp = await startTestPlatform();
  org = await tp.createOrg();
  other = await tp.createOrg();
  for (const name of [APP, 'elsewhere']) {
    expect(
      (await tp.request('POST', '/v1/apps', { token: org.token, body: { name } })).status,
    ).toBe(201);
  }
  const up = await uploadSource(tp.url, org.token, APP, sourceArchive({ Dockerfile: 'FROM x\n' }));
  expect(up.status).toBe(201);
  sourceId = up.body.id;
  const made = await tp.request('POST', `/v1/apps/${APP}/builds`, {
    token: org.token,
    body: { source: sourceId },
  });
  expect(made.status).toBe(202);
  buildId = made.body.id;
}, 60_000);

afterAll(async () => {
  await tp?.close();
});

describe('builds routes: who may call', () => {
  it('lets the full key do everything (the baseline)', async () => {
    expect(await answers(org.token)).toEqual({
      sources: [201, undefined],
      detect: [200, undefined],
      create: [202, undefined],
      list: [200, undefined],
      get: [200, undefined],
      logs: [200, undefined],
    });
  });

  it('lets a read-only key read, and refuses it every write with token-scope', async () => {
    const { token } = await key({ scopes: ['read'] });
    const got = await answers(token);
    for (const [name, [status, code]] of Object.entries(got)) {
      if (READS.has(name)) expect([name, status]).toEqual([name, 200]);
      else expect([name, status, code]).toEqual([name, 403, 'token-scope']);
    }
  });

  it('refuses an agent token limited to another app on every route', async () => {
    const { token } = await key({ agent: { class: 'sandbox', apps: ['elsewhere'] } });
    const got = await answers(token);
    for (const [name, [status, code]] of Object.entries(got)) {
      expect([name, status, code]).toEqual([name, 403, 'agent-token-app-scope']);
    }
    // The same token on its own app passes (the refusal is the app, not the route).
    const own = await tp.request('GET', '/v1/apps/elsewhere/builds', { token });
    expect(own.status).toBe(200);
  });

  it('refuses a production agent token the writes (sources, builds), lets it read and detect', async () => {
    const { token } = await key({ agent: { class: 'production' } });
    const got = await answers(token);
    for (const [name, [status, code]] of Object.entries(got)) {
      if (WRITES.has(name)) {
        expect([name, status, code]).toEqual([name, 403, 'agent-token-production-readonly']);
      } else {
        expect([name, status]).toEqual([name, 200]);
      }
    }
  });

  it("answers another organization's key exactly like a missing app or build", async () => {
    const theirs = await answers(other.token);
    for (const [name, [status, code]] of Object.entries(theirs)) {
      expect([name, status, code]).toEqual([
        name,
        404,
        name === 'get' || name === 'logs' ? 'build-not-found' : 'not-found',
      ]);
    }
    // Body for body, the same as for an app and a build that exist nowhere (names aside).
    const missingBuild = 'bld-' + 'x'.repeat(buildId.length - 4);
    const norm = (x: unknown) =>
      JSON.stringify(x)
        .replaceAll(APP, 'NAME')
        .replaceAll('nowhere', 'NAME')
        .replaceAll(buildId, 'ID')
        .replaceAll(missingBuild, 'ID');
    const missing = routes('nowhere', missingBuild);
    for (const [i, r] of routes(APP, buildId).entries()) {
      const a = await r.send(other.token);
      const b = await missing[i]!.send(other.token);
      expect([r.name, a.status, norm(a.body)]).toEqual([r.name, b.status, norm(b.body)]);
    }
  });

  it('refuses a revoked key on every route with unauthenticated', async () => {
    const k = await key({});
    expect((await tp.request('GET', `/v1/apps/${APP}/builds`, { token: k.token })).status).toBe(
      200,
    );
    expect((await tp.request('DELETE', `/v1/tokens/${k.id}`, { token: org.token })).status).toBe(
      204,
    );
    const got = await answers(k.token);
    for (const [name, [status, code]] of Object.entries(got)) {
      expect([name, status, code]).toEqual([name, 401, 'unauthenticated']);
    }
  });
});
