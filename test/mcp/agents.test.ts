/**
 * Agent tokens through MCP: each tool is judged and audited as the `/v1` route it stands
 * for (spec 4.12, 5.4), and another organization's objects answer like missing ones.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, type TestOrg, type TestPlatform } from '../helpers/platform.js';
import { legacyClient, modernClient, modernRequest, post } from './helpers.js';

let tp: TestPlatform;
let org: TestOrg;
let other: TestOrg;

async function agentToken(agent: Record<string, unknown>): Promise<{ id: string; token: string }> {
  const res = await tp.request('POST', '/v1/tokens', {
    token: org.token,
    body: { name: 'mcp agent', agent },
  });
  expect(res.status).toBe(201);
  return res.body;
}

/** Calls one tool with a raw 2026-07-28 POST; the tool result, or the JSON-RPC answer. */
async function call(token: string, name: string, args: Record<string, unknown>) {
  const res = await post(tp.url, ...modernRequest(token, 'tools/call', { name, arguments: args }));
  expect(res.status).toBe(200);
  const result = res.json.result as { isError?: boolean; content: { text: string }[] };
  return { isError: result.isError === true, answer: JSON.parse(result.content[0]!.text) };
}

beforeAll(async () => {
  tp = await startTestPlatform();
  org = await tp.createOrg();
  other = await tp.createOrg();
  for (const name of ['agent-web', 'agent-other']) {
    expect(
      (await tp.request('POST', '/v1/apps', { token: org.token, body: { name } })).status,
    ).toBe(201);
  }
  await tp.request('POST', '/v1/apps', { token: other.token, body: { name: 'theirs' } });
});
afterAll(async () => tp?.close());

describe('agent tokens through MCP', () => {
  it('keeps a production-class token to reading tools', async () => {
    const prod = await agentToken({ class: 'production' });
    const client = await modernClient(tp.url, prod.token);
    try {
      const write = await client.callTool({ name: 'app_create', arguments: { name: 'by-prod' } });
      expect(write.isError).toBe(true);
      expect(JSON.stringify(write.content)).toContain('agent-token-production-readonly');
      const read = await client.callTool({ name: 'apps_list', arguments: {} });
      expect(read.isError).toBeFalsy();
    } finally {
      await client.close();
    }
    expect((await tp.request('GET', '/v1/apps/by-prod', { token: org.token })).status).toBe(404);
  });

  it('keeps a production-class token to reading tools with the 2025-11-25 client too', async () => {
    const prod = await agentToken({ class: 'production' });
    const client = await legacyClient(tp.url, prod.token);
    try {
      const write = await client.callTool({
        name: 'app_create',
        arguments: { name: 'by-prod-1x' },
      });
      expect(write.isError).toBe(true);
      expect(JSON.stringify(write.content)).toContain('agent-token-production-readonly');
      expect((await client.callTool({ name: 'apps_list', arguments: {} })).isError).toBeFalsy();
    } finally {
      await client.close();
    }
    expect((await tp.request('GET', '/v1/apps/by-prod-1x', { token: org.token })).status).toBe(404);
  });

  it('lets production read data only with prodDataRead', async () => {
    expect(
      (await tp.request('POST', '/v1/buckets', { token: org.token, body: { name: 'mcp-data' } }))
        .status,
    ).toBe(201);
    const blind = await agentToken({ class: 'production' });
    const refused = await call(blind.token, 'bucket_objects_list', { name: 'mcp-data' });
    expect(refused).toMatchObject({
      isError: true,
      answer: { status: 403, code: 'agent-token-production-data' },
    });
    const reader = await agentToken({ class: 'production', prodDataRead: true });
    const listed = await call(reader.token, 'bucket_objects_list', { name: 'mcp-data' });
    expect(listed.isError).toBe(false);
  });

  it('keeps an app-limited token to its apps', async () => {
    const limited = await agentToken({ class: 'sandbox', apps: ['agent-web'] });
    const mine = await call(limited.token, 'secrets_set', {
      app: 'agent-web',
      secrets: { TOKEN: 'x' },
    });
    expect(mine.isError).toBe(false);
    const theirs = await call(limited.token, 'secrets_set', {
      app: 'agent-other',
      secrets: { TOKEN: 'x' },
    });
    expect(theirs).toMatchObject({
      isError: true,
      answer: { status: 403, code: 'agent-token-app-scope' },
    });
    const read = await call(limited.token, 'app_get', { name: 'agent-other' });
    expect(read.answer.code).toBe('agent-token-app-scope');
  });

  it('leaves one audit row per tool call, with the route it ran as', async () => {
    const a = await agentToken({ class: 'twin', apps: ['agent-web'] });
    await call(a.token, 'app_get', { name: 'agent-web' });
    await call(a.token, 'app_get', { name: 'agent-other' });
    await call(a.token, 'secrets_list', { app: 'agent-web' });
    // Protocol traffic (listing tools) runs no route, so it leaves no row.
    await post(tp.url, ...modernRequest(a.token, 'tools/list'));
    const audit = await tp.request('GET', `/v1/agent-actions?token=${a.id}`, { token: org.token });
    expect(audit.status).toBe(200);
    const routes = (audit.body as { method: string; route: string; verdict: string }[])
      .map((r) => `${r.method} ${r.route} ${r.verdict}`)
      .reverse();
    expect(routes).toEqual([
      'GET /v1/apps/:name allowed',
      'GET /v1/apps/:name refused',
      'GET /v1/apps/:name/secrets allowed',
    ]);
  });

  it('does not run the tool when the audit cannot be written', async () => {
    const a = await agentToken({ class: 'sandbox' });
    const admin = new pg.Client({ connectionString: tp.db.url });
    await admin.connect();
    await admin.query('ALTER TABLE agent_actions RENAME TO agent_actions_away');
    try {
      const res = await call(a.token, 'app_create', { name: 'unaudited' });
      expect(res).toMatchObject({
        isError: true,
        answer: { status: 503, code: 'agent-audit-unavailable' },
      });
    } finally {
      await admin.query('ALTER TABLE agent_actions_away RENAME TO agent_actions');
      await admin.end();
    }
    expect((await tp.request('GET', '/v1/apps/unaudited', { token: org.token })).status).toBe(404);
  });

  it('refuses the organization header on an agent token, as the route would', async () => {
    const a = await agentToken({ class: 'sandbox' });
    const [body, headers] = modernRequest(a.token, 'tools/call', {
      name: 'apps_list',
      arguments: {},
    });
    const res = await post(tp.url, body, { ...headers, 'x-platform-org': other.id });
    expect(res.json.result.isError).toBe(true);
    expect(res.json.result.content[0].text).toContain('agent-token-delegation');
  });
});

describe('another organization through MCP', () => {
  it('answers its objects exactly like missing ones', async () => {
    const theirs = await call(org.token, 'app_get', { name: 'theirs' });
    const missing = await call(org.token, 'app_get', { name: 'never-made' });
    expect(theirs.isError).toBe(true);
    expect(theirs.answer).toMatchObject({ status: 404, code: 'not-found' });
    expect(theirs.answer.error).toBe(missing.answer.error.replace('never-made', 'theirs'));
    const del = await call(org.token, 'app_delete', { name: 'theirs' });
    expect(del.answer).toMatchObject({ status: 404, code: 'not-found' });
    expect((await tp.request('GET', '/v1/apps/theirs', { token: other.token })).status).toBe(200);
  });
});
