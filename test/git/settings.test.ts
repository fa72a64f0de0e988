/**
 * An app's Git settings (issue #26), `GET`/`PUT /v1/apps/:name/git` and their MCP tools,
 * on a real pier without machines: the defaults (main or master deploys, branches
 * preview) and the push URLs; changes and going back to the default; every bad field at
 * once; who may read and who may change them (a read-only key reads but may not change,
 * a key or agent token for another app may do neither, a production agent only reads);
 * another organization's app answers exactly like a missing one; a preview's settings
 * say it makes no previews, and turning them on there is refused.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, type TestOrg, type TestPlatform } from '../helpers/platform.js';
import { modernRequest, post } from '../mcp/helpers.js';

let tp: TestPlatform;
let org: TestOrg;
let other: TestOrg;

const gitOf = (app: string, token = org.token) =>
  tp.request('GET', `/v1/apps/${app}/git`, { token });
const setGit = (app: string, body: unknown, token = org.token) =>
  tp.request('PUT', `/v1/apps/${app}/git`, { token, body });

async function key(body: Record<string, unknown>): Promise<{ id: string; token: string }> {
  const res = await tp.request('POST', '/v1/tokens', {
    token: org.token,
    body: { name: 'git-settings', ...body },
  });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return { id: res.body.id, token: res.body.token };
}

/** One MCP tool call; the route's answer (or refusal) as the tool gives it. */
async function tool(token: string, name: string, args: Record<string, unknown>) {
  const res = await post(tp.url, ...modernRequest(token, 'tools/call', { name, arguments: args }));
  expect(res.status).toBe(200);
  const result = res.json.result as { isError?: boolean; content: { text: string }[] };
  return { isError: result.isError === true, answer: JSON.parse(result.content[0]!.text) };
}

beforeAll(async () => {
  tp = await startTestPlatform();
  org = await tp.createOrg();
  other = await tp.createOrg();
  for (const name of ['web', 'elsewhere']) {
    expect(
      (await tp.request('POST', '/v1/apps', { token: org.token, body: { name } })).status,
    ).toBe(201);
  }
  expect(
    (await tp.request('POST', '/v1/apps', { token: other.token, body: { name: 'theirs' } })).status,
  ).toBe(201);
});
afterAll(async () => tp?.close());

describe('GET and PUT /v1/apps/:name/git', () => {
  it('answers the defaults and where to push: HTTPS under the API, SSH at the gateway', async () => {
    const gateway = (await tp.request('GET', '/v1/ssh', { token: org.token })).body;
    const res = await gitOf('web');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      app: 'web',
      productionBranch: null,
      productionBranches: ['main', 'master'],
      branchPreviews: true,
      pushUrls: {
        https: `${tp.url}/git/web.git`,
        ssh: `ssh://git@${gateway.host}:${gateway.port}/web.git`,
      },
    });
  });

  it('sets the production branch and previews; a field left out keeps its value; null goes back to the default', async () => {
    const set = await setGit('web', { productionBranch: 'trunk', branchPreviews: false });
    expect(set.status, JSON.stringify(set.body)).toBe(200);
    expect(set.body).toMatchObject({
      productionBranch: 'trunk',
      productionBranches: ['trunk'],
      branchPreviews: false,
    });
    expect((await gitOf('web')).body).toEqual(set.body);
    const previewsOn = await setGit('web', { branchPreviews: true });
    expect(previewsOn.body).toMatchObject({ productionBranch: 'trunk', branchPreviews: true });
    const branch = await setGit('web', { productionBranch: 'release/2024' });
    expect(branch.body).toMatchObject({ productionBranch: 'release/2024', branchPreviews: true });
    expect((await setGit('web', {})).body).toEqual(branch.body);
    const back = await setGit('web', { productionBranch: null });
    expect(back.body).toMatchObject({
      productionBranch: null,
      productionBranches: ['main', 'master'],
      branchPreviews: true,
    });
    // The other app of the organization is untouched.
    expect((await gitOf('elsewhere')).body).toMatchObject({
      productionBranch: null,
      branchPreviews: true,
    });
  });

  it('names every bad field at once, and changes nothing', async () => {
    await setGit('web', { productionBranch: 'kept' });
    const res = await setGit('web', {
      productionBranch: 'a..b',
      branchPreviews: 'yes',
      extra: 1,
    });
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('bad-request');
    const paths = (res.body.issues as { path: string; message: string }[]).map((i) => i.path);
    expect(paths.sort()).toEqual(['branchPreviews', 'extra', 'productionBranch']);
    expect(res.body.issues).toContainEqual({
      path: 'productionBranch',
      message: "a branch name that may not contain '..'",
    });
    for (const productionBranch of ['', '-x', 'has space', 'x.lock', 'a:b', 'b'.repeat(256), 42]) {
      const bad = await setGit('web', { productionBranch });
      expect(bad.status, String(productionBranch)).toBe(400);
      expect(bad.body.issues.map((i: { path: string }) => i.path)).toEqual(['productionBranch']);
    }
    expect((await setGit('web', { branchPreviews: null })).status).toBe(400);
    expect((await gitOf('web')).body).toMatchObject({
      productionBranch: 'kept',
      branchPreviews: true,
    });
    await setGit('web', { productionBranch: null });
  });

  it('lets a read-only key read but not change them; a deploy key for the app may', async () => {
    const reader = await key({ scopes: ['read'] });
    expect((await gitOf('web', reader.token)).status).toBe(200);
    const refused = await setGit('web', { branchPreviews: false }, reader.token);
    expect(refused.status).toBe(403);
    expect(refused.body.code).toBe('token-scope');
    const elsewhere = await key({ scopes: ['deploy:elsewhere'] });
    const theirs = await setGit('web', { branchPreviews: false }, elsewhere.token);
    expect([theirs.status, theirs.body.code]).toEqual([403, 'token-scope']);
    expect((await gitOf('web')).body.branchPreviews).toBe(true);
    const deployer = await key({ scopes: ['deploy:web'] });
    const set = await setGit('web', { branchPreviews: false }, deployer.token);
    expect(set.status, JSON.stringify(set.body)).toBe(200);
    expect(set.body.branchPreviews).toBe(false);
    await setGit('web', { branchPreviews: true });
  });

  it('judges agent tokens as for previews: another app refused, production only reads', async () => {
    const limited = await key({ agent: { class: 'sandbox', apps: ['elsewhere'] } });
    for (const res of [
      await gitOf('web', limited.token),
      await setGit('web', { branchPreviews: false }, limited.token),
    ]) {
      expect([res.status, res.body.code]).toEqual([403, 'agent-token-app-scope']);
    }
    expect((await setGit('elsewhere', { branchPreviews: false }, limited.token)).status).toBe(200);
    const prod = await key({ agent: { class: 'production' } });
    expect((await gitOf('web', prod.token)).status).toBe(200);
    const write = await setGit('web', { productionBranch: 'x' }, prod.token);
    expect([write.status, write.body.code]).toEqual([403, 'agent-token-production-readonly']);
    expect((await gitOf('web')).body).toMatchObject({
      productionBranch: null,
      branchPreviews: true,
    });
    await setGit('elsewhere', { branchPreviews: true });
  });

  it("answers another organization's app exactly like a missing one", async () => {
    const norm = (body: unknown) => JSON.stringify(body).replaceAll(/theirs|nowhere/g, 'APP');
    for (const call of [
      (app: string) => gitOf(app),
      (app: string) => setGit(app, { branchPreviews: false }),
    ]) {
      const theirs = await call('theirs');
      const missing = await call('nowhere');
      expect(theirs.status).toBe(404);
      expect(theirs.body).toEqual({ error: "App 'theirs' not found.", code: 'not-found' });
      expect(norm(theirs.body)).toBe(norm(missing.body));
    }
    // Their key does not reach ours either, and their app kept its settings.
    expect((await gitOf('web', other.token)).status).toBe(404);
    expect((await gitOf('theirs', other.token)).body.branchPreviews).toBe(true);
  });

  it('a preview makes no previews: it says so, and turning them on there is refused', async () => {
    const made = await tp.request('POST', '/v1/apps/web/previews', {
      token: org.token,
      body: { name: 'feat' },
    });
    expect(made.status, JSON.stringify(made.body)).toBe(202);
    const res = await gitOf('web--feat');
    expect(res.body).toMatchObject({
      app: 'web--feat',
      productionBranch: null,
      branchPreviews: false,
      previewOf: 'web',
      pushUrls: { https: `${tp.url}/git/web--feat.git` },
    });
    const on = await setGit('web--feat', { branchPreviews: true });
    expect(on.status).toBe(409);
    expect(on.body.code).toBe('conflict');
    expect(on.body.error).toMatch(/'web--feat' is a preview of 'web'/);
    const trunk = await setGit('web--feat', { productionBranch: 'trunk', branchPreviews: false });
    expect(trunk.status).toBe(200);
    expect(trunk.body).toMatchObject({ productionBranch: 'trunk', branchPreviews: false });
    // Turning previews off on the app leaves its previews where they are.
    expect((await setGit('web', { branchPreviews: false })).status).toBe(200);
    expect(
      (await tp.request('GET', '/v1/apps/web/previews/feat', { token: org.token })).status,
    ).toBe(200);
    await setGit('web', { branchPreviews: true });
    expect(
      (await tp.request('DELETE', '/v1/apps/web/previews/feat', { token: org.token })).status,
    ).toBe(204);
  });
});

describe('MCP: app_git_get and app_git_set', () => {
  it('run as the routes: judged and audited for agent tokens', async () => {
    const agent = await key({ agent: { class: 'sandbox', apps: ['web'] } });
    const read = await tool(agent.token, 'app_git_get', { app: 'web' });
    expect(read).toMatchObject({ isError: false, answer: { app: 'web', branchPreviews: true } });
    const set = await tool(agent.token, 'app_git_set', {
      app: 'web',
      productionBranch: 'trunk',
      branchPreviews: false,
    });
    expect(set).toMatchObject({
      isError: false,
      answer: { productionBranch: 'trunk', branchPreviews: false },
    });
    const theirs = await tool(agent.token, 'app_git_set', {
      app: 'elsewhere',
      branchPreviews: false,
    });
    expect(theirs).toMatchObject({
      isError: true,
      answer: { status: 403, code: 'agent-token-app-scope' },
    });
    const bad = await tool(agent.token, 'app_git_set', { app: 'web', productionBranch: 'a b' });
    expect(bad).toMatchObject({ isError: true, answer: { status: 400, code: 'bad-request' } });
    const audit = await tp.request('GET', `/v1/agent-actions?token=${agent.id}`, {
      token: org.token,
    });
    expect(
      (audit.body as { method: string; route: string; verdict: string }[])
        .map((r) => `${r.method} ${r.route} ${r.verdict}`)
        .reverse(),
    ).toEqual([
      'GET /v1/apps/:name/git allowed',
      'PUT /v1/apps/:name/git allowed',
      'PUT /v1/apps/:name/git refused',
      'PUT /v1/apps/:name/git allowed',
    ]);
    expect((await gitOf('elsewhere')).body.branchPreviews).toBe(true);
    await setGit('web', { productionBranch: null, branchPreviews: true });
  });
});
