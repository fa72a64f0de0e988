/**
 * The MCP tools of builds, deploys and releases (issue #25 item 7): an agent uploads a
 * small static site as files, detects and builds it with the real builder (buildah, a
 * base image in a local registry), deploys the build, and rolls back; each tool runs as
 * its `/v1` route, so an app-limited agent token stays in its app, a production one only
 * reads, and every call leaves its audit row.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { busyboxLayer, DEFAULT_APPLETS } from '../../src/runtime/images/build.test-helper.js';
import { sourceArchive } from '../builds/archive.js';
import { canRunMachines, startMachineBed, type MachineBed } from '../machines/bed.js';
import { modernClient, modernRequest, post } from './helpers.js';

let bed: MachineBed;
const SITE = {
  'index.html': '<h1>shipped by an agent</h1>',
  'css/site.css': 'h1 { color: teal }',
};

interface ToolAnswer {
  isError: boolean;
  text: string;
  /** The text as JSON (undefined for a text answer such as a build's log). */
  answer: any;
}

/** One tool call as a raw 2026-07-28 POST (pier's fast path). */
async function call(token: string, name: string, args: Record<string, unknown>) {
  const res = await post(
    bed.tp.url,
    ...modernRequest(token, 'tools/call', { name, arguments: args }),
  );
  expect(res.status, res.text).toBe(200);
  const result = res.json.result as { isError?: boolean; content: { text: string }[] };
  const text = result.content[0]!.text;
  let answer: unknown;
  try {
    answer = JSON.parse(text);
  } catch {
    answer = undefined;
  }
  return { isError: result.isError === true, text, answer } as ToolAnswer;
}

async function agent(spec: Record<string, unknown>): Promise<{ id: string; token: string }> {
  const res = await bed.req('POST', '/v1/tokens', { name: 'mcp deploy agent', agent: spec });
  expect(res.status).toBe(201);
  return res.body;
}

/**
 * Waits for a build or deploy to end, then reads it with `tool` (build_get, deploy_get).
 * The waiting polls the route directly: the organization's MCP calls are limited to 120 a
 * minute, and the file's calls stay well under that.
 */
async function until(
  token: string,
  tool: 'build_get' | 'deploy_get',
  id: string,
  done: (a: any) => boolean,
  deadlineMs = 90_000,
): Promise<any> {
  const path = tool === 'build_get' ? `/v1/builds/${id}` : `/v1/deploys/${id}`;
  const end = Date.now() + deadlineMs;
  for (;;) {
    const now = await bed.req('GET', path);
    if (done(now.body)) break;
    if (Date.now() > end) throw new Error(`${path} never finished: ${JSON.stringify(now.body)}`);
    await new Promise((r) => setTimeout(r, 250));
  }
  const got = await call(token, tool, { id });
  expect(got.isError, got.text).toBe(false);
  expect(done(got.answer)).toBe(true);
  return got.answer;
}

/** Uploads SITE (with `extra`) to `app` and builds it through MCP; the finished build. */
async function shipBuild(token: string, app: string, extra: Record<string, string> = {}) {
  const up = await call(token, 'app_source_upload', { app, files: { ...SITE, ...extra } });
  expect(up.isError, up.text).toBe(false);
  const made = await call(token, 'app_build', { app, source: up.answer.id });
  expect(made.isError, made.text).toBe(false);
  return until(
    token,
    'build_get',
    made.answer.id,
    (b) => b.state === 'done' || b.state === 'failed',
  );
}

beforeAll(async () => {
  if (!canRunMachines) return;
  bed = await startMachineBed('md', 90, { buildTimeoutS: 60, buildDiskGb: 1, buildMemoryMb: 256 });
  // Detect's static base image is a busybox in the local registry (there is no internet).
  bed.tp.platform.ctx.config.detectImages.static = await bed.image('static:1', {
    layers: [busyboxLayer([...DEFAULT_APPLETS])],
    config: { Cmd: ['/bin/sh'] },
  });
  for (const name of ['agent-site', 'agent-other']) {
    expect((await bed.req('POST', '/v1/apps', { name })).status).toBe(201);
  }
}, 180_000);
afterAll(async () => bed?.close(), 120_000);

describe.skipIf(!canRunMachines)('builds through MCP', () => {
  let build: any;

  it('uploads a static site as files, detects it and builds it: the build is done', async () => {
    const token = bed.org.token;
    const up = await call(token, 'app_source_upload', { app: 'agent-site', files: SITE });
    expect(up.isError, up.text).toBe(false);
    expect(up.answer).toMatchObject({ app: 'agent-site', files: 3 });
    expect(up.answer.sha256).toMatch(/^[a-f0-9]{64}$/);
    // The same files make the same archive.
    const again = await call(token, 'app_source_upload', { app: 'agent-site', files: SITE });
    expect(again.answer.sha256).toBe(up.answer.sha256);

    const detected = await call(token, 'app_detect', { app: 'agent-site', source: up.answer.id });
    expect(detected.answer).toMatchObject({ builder: 'static', internalPort: 8080 });

    const made = await call(token, 'app_build', { app: 'agent-site', source: up.answer.id });
    expect(made.answer).toMatchObject({ app: 'agent-site', state: 'queued' });
    build = await until(token, 'build_get', made.answer.id, (b) =>
      ['done', 'failed'].includes(b.state),
    );
    const log = await call(token, 'build_logs', { id: build.id });
    expect(build.state, log.text).toBe('done');
    expect(build.imageDigest).toMatch(/^sha256:[a-f0-9]{64}$/);
    // The log is the builder's text, answered as it is (not JSON).
    expect(log.isError).toBe(false);
    expect(log.answer).toBeUndefined();
    expect(log.text).toContain('COPY . /srv');

    const listed = await call(token, 'builds_list', { app: 'agent-site' });
    expect(listed.answer.map((b: any) => b.id)).toContain(build.id);
  }, 180_000);

  it('takes a gzip’d tar in base64, and answers the route’s refusals of a bad one', async () => {
    const token = bed.org.token;
    const tar = sourceArchive({ 'index.html': 'from a tarball' });
    const up = await call(token, 'app_source_upload', {
      app: 'agent-site',
      archiveBase64: tar.toString('base64'),
    });
    expect(up.isError, up.text).toBe(false);
    expect(up.answer).toMatchObject({ app: 'agent-site', sizeBytes: tar.length });

    // The route's own archive checks apply: `..` in an entry is its 400.
    const evil = sourceArchive([{ path: '../escape', content: 'x' }]);
    const refused = await call(token, 'app_source_upload', {
      app: 'agent-site',
      archiveBase64: evil.toString('base64'),
    });
    expect(refused).toMatchObject({ isError: true, answer: { status: 400 } });
    const notTar = await call(token, 'app_source_upload', {
      app: 'agent-site',
      archiveBase64: Buffer.from('not a tar').toString('base64'),
    });
    expect(notTar).toMatchObject({ isError: true, answer: { status: 400 } });
  });

  it('refuses files outside the tree, and both or neither of files and archiveBase64', async () => {
    const client = await modernClient(bed.tp.url, bed.org.token);
    try {
      for (const args of [
        { app: 'agent-site', files: { '../up.txt': 'x' } },
        { app: 'agent-site', files: { '/etc/passwd': 'x' } },
        { app: 'agent-site', files: { 'a//b': 'x' } },
        { app: 'agent-site' },
        { app: 'agent-site', files: { a: 'x' }, archiveBase64: 'AAAA' },
        { app: 'agent-site', files: {} },
      ]) {
        const res = await client.callTool({ name: 'app_source_upload', arguments: args });
        expect(res.isError, JSON.stringify(args)).toBe(true);
      }
      // The SDK path (a client, not the raw fast path) uploads as well.
      const ok = await client.callTool({
        name: 'app_source_upload',
        arguments: { app: 'agent-site', files: { 'index.html': 'via the client' } },
      });
      expect(ok.isError, JSON.stringify(ok.content)).toBeFalsy();
    } finally {
      await client.close();
    }
  });

  it('keeps an app-limited agent token to its app', async () => {
    const limited = await agent({ class: 'sandbox', apps: ['agent-site'] });
    const mine = await call(limited.token, 'app_source_upload', {
      app: 'agent-site',
      files: SITE,
    });
    expect(mine.isError, mine.text).toBe(false);
    for (const [tool, args] of [
      ['app_source_upload', { app: 'agent-other', files: SITE }],
      ['app_detect', { app: 'agent-other', source: mine.answer.id }],
      ['app_build', { app: 'agent-other', source: mine.answer.id }],
      ['builds_list', { app: 'agent-other' }],
      ['app_deploy', { app: 'agent-other', image: `build:${build.id}` }],
      ['deploys_list', { app: 'agent-other' }],
      ['releases_list', { app: 'agent-other' }],
      ['app_rollback', { app: 'agent-other' }],
    ] as const) {
      const res = await call(limited.token, tool, args);
      expect(res, tool).toMatchObject({
        isError: true,
        answer: { status: 403, code: 'agent-token-app-scope' },
      });
    }
    // Nothing reached the other app.
    expect((await bed.req('GET', '/v1/apps/agent-other/builds')).body).toEqual([]);
  });

  it('keeps a production agent token to reading: no upload, build, deploy or rollback', async () => {
    const prod = await agent({ class: 'production' });
    for (const [tool, args] of [
      ['app_source_upload', { app: 'agent-site', files: SITE }],
      ['app_build', { app: 'agent-site', source: 'src-any' }],
      ['app_deploy', { app: 'agent-site', image: `build:${build.id}` }],
      ['app_rollback', { app: 'agent-site' }],
    ] as const) {
      const res = await call(prod.token, tool, args);
      expect(res, tool).toMatchObject({
        isError: true,
        answer: { status: 403, code: 'agent-token-production-readonly' },
      });
    }
    for (const [tool, args] of [
      ['releases_list', { app: 'agent-site' }],
      ['builds_list', { app: 'agent-site' }],
      ['build_get', { id: build.id }],
      ['build_logs', { id: build.id }],
      ['deploys_list', { app: 'agent-site' }],
    ] as const) {
      const res = await call(prod.token, tool, args);
      expect(res.isError, `${tool}: ${res.text}`).toBe(false);
    }
  });

  it('leaves one audit row per tool call, with the route it ran as', async () => {
    const a = await agent({ class: 'twin', apps: ['agent-site'] });
    const up = await call(a.token, 'app_source_upload', { app: 'agent-site', files: SITE });
    await call(a.token, 'app_detect', { app: 'agent-site', source: up.answer.id });
    await call(a.token, 'app_build', { app: 'agent-other', source: up.answer.id });
    await call(a.token, 'builds_list', { app: 'agent-site' });
    await call(a.token, 'build_get', { id: build.id });
    await call(a.token, 'build_logs', { id: build.id });
    await call(a.token, 'releases_list', { app: 'agent-site' });
    await call(a.token, 'deploys_list', { app: 'agent-site' });
    const audit = await bed.req('GET', `/v1/agent-actions?token=${a.id}`);
    expect(audit.status).toBe(200);
    const rows = (audit.body as { method: string; route: string; verdict: string }[])
      .map((r) => `${r.method} ${r.route} ${r.verdict}`)
      .reverse();
    expect(rows).toEqual([
      'POST /v1/apps/:name/sources allowed',
      'POST /v1/apps/:name/detect allowed',
      'POST /v1/apps/:name/builds refused',
      'GET /v1/apps/:name/builds allowed',
      'GET /v1/builds/:id allowed',
      'GET /v1/builds/:id/logs allowed',
      'GET /v1/apps/:name/releases allowed',
      'GET /v1/apps/:name/deploys allowed',
    ]);
  });
});

describe.skipIf(!canRunMachines)('deploys through MCP', () => {
  it('deploys two builds, lists deploys and releases, and rolls back to the first', async () => {
    const token = bed.org.token;
    const first = await shipBuild(token, 'agent-site');
    expect(first.state).toBe('done');
    const deployed = await call(token, 'app_deploy', {
      app: 'agent-site',
      image: `build:${first.id}`,
      config: { internalPort: 8080 },
    });
    expect(deployed.isError, deployed.text).toBe(false);
    expect(deployed.answer).toMatchObject({ app: 'agent-site', image: `build:${first.id}` });
    const d1 = await until(token, 'deploy_get', deployed.answer.id, (d) =>
      ['done', 'error'].includes(d.status),
    );
    expect(d1.status, JSON.stringify(d1)).toBe('done');

    const second = await shipBuild(token, 'agent-site', { 'v2.txt': 'two' });
    const d2 = await call(token, 'app_deploy', { app: 'agent-site', image: `build:${second.id}` });
    expect(d2.isError, d2.text).toBe(false);
    expect(
      (await until(token, 'deploy_get', d2.answer.id, (d) => ['done', 'error'].includes(d.status)))
        .status,
    ).toBe('done');

    const releases = await call(token, 'releases_list', { app: 'agent-site' });
    expect(releases.answer.map((r: any) => [r.version, r.status, r.build])).toEqual([
      [2, 'live', second.id],
      [1, 'superseded', first.id],
    ]);
    const deploys = await call(token, 'deploys_list', { app: 'agent-site' });
    expect(deploys.answer.map((d: any) => d.id)).toEqual([d2.answer.id, deployed.answer.id]);

    const back = await call(token, 'app_rollback', { app: 'agent-site' });
    expect(back.isError, back.text).toBe(false);
    expect(back.answer).toMatchObject({ app: 'agent-site', rollbackOf: 1 });
    const done = await until(token, 'deploy_get', back.answer.id, (d) =>
      ['done', 'error'].includes(d.status),
    );
    expect(done.status, JSON.stringify(done)).toBe('done');
    const after = await call(token, 'releases_list', { app: 'agent-site' });
    expect(after.answer[0]).toMatchObject({ version: 3, status: 'live', build: first.id });
    // A rollback to the release that is live now is the route's 7.4 code.
    const same = await call(token, 'app_rollback', { app: 'agent-site', version: 3 });
    expect(same).toMatchObject({ isError: true, answer: { code: 'rollback-target-current' } });

    // An agent's deploy tools leave their audit rows too, allowed or refused.
    const a = await agent({ class: 'twin', apps: ['agent-site'] });
    await call(a.token, 'deploy_get', { id: back.answer.id });
    await call(a.token, 'app_rollback', { app: 'agent-site', version: 3 });
    await call(a.token, 'app_deploy', { app: 'agent-other', image: `build:${first.id}` });
    const audit = await bed.req('GET', `/v1/agent-actions?token=${a.id}`);
    expect(
      (audit.body as { method: string; route: string; verdict: string }[])
        .map((r) => `${r.method} ${r.route} ${r.verdict}`)
        .reverse(),
    ).toEqual([
      'GET /v1/deploys/:id allowed',
      'POST /v1/apps/:name/rollback allowed',
      'POST /v1/apps/:name/deploys refused',
    ]);
  }, 300_000);
});
