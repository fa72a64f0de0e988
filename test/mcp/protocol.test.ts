/**
 * `POST /v1/mcp` spoken by clients nobody here wrote (the 2.x client pinned to
 * 2026-07-28, the 1.x SDK on 2025-11-25), and the HTTP and JSON-RPC answers to bad input.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, type TestOrg, type TestPlatform } from '../helpers/platform.js';
import { legacyClient, modernClient, modernRequest, post } from './helpers.js';

let tp: TestPlatform;
let org: TestOrg;

beforeAll(async () => {
  tp = await startTestPlatform();
  org = await tp.createOrg();
});
afterAll(async () => tp?.close());

/** The parsed JSON of a tool result's first text block. */
function resultJson(result: { content?: unknown }): Record<string, unknown> {
  const [first] = result.content as { type: string; text: string }[];
  return JSON.parse(first!.text) as Record<string, unknown>;
}

describe('MCP clients', () => {
  it('lists and calls tools with the 2026-07-28 client', async () => {
    const client = await modernClient(tp.url, org.token);
    try {
      const { tools } = await client.listTools();
      const names = tools.map((t) => t.name);
      for (const name of [
        'apps_list',
        'machine_create',
        'app_logs',
        'database_branch',
        'database_fork',
        'database_restore',
        'volume_create',
        'bucket_objects_list',
        'bucket_presign',
        'secrets_list',
        'secrets_set',
        'billing_credits',
        'usage_get',
        'agent_actions_list',
      ]) {
        expect(names).toContain(name);
      }
      const create = tools.find((t) => t.name === 'app_create')!;
      expect(create.description).toContain('POST /v1/apps');
      expect(create.inputSchema).toMatchObject({ type: 'object', required: ['name'] });

      const made = await client.callTool({ name: 'app_create', arguments: { name: 'mcp-web' } });
      expect(made.isError).toBeFalsy();
      expect(resultJson(made)).toMatchObject({ name: 'mcp-web' });
      const set = await client.callTool({
        name: 'secrets_set',
        arguments: { app: 'mcp-web', secrets: { API_KEY: 'sekrit' } },
      });
      expect(set.isError).toBeFalsy();
      const listed = await client.callTool({ name: 'secrets_list', arguments: { app: 'mcp-web' } });
      expect(JSON.stringify(listed)).toContain('API_KEY');
      expect(JSON.stringify(listed)).not.toContain('sekrit');
    } finally {
      await client.close();
    }
  });

  it('lists and calls tools with the 2025-11-25 client (stateless initialize)', async () => {
    const client = await legacyClient(tp.url, org.token);
    try {
      expect((await client.listTools()).tools.length).toBeGreaterThan(30);
      const apps = await client.callTool({ name: 'apps_list', arguments: {} });
      expect(apps.isError).toBeFalsy();
      expect(JSON.stringify(apps)).toContain('mcp-web');
    } finally {
      await client.close();
    }
  });

  it('answers application/json in both eras, and 202 with no body to a notification', async () => {
    const modern = await post(tp.url, ...modernRequest(org.token, 'tools/list'));
    expect(modern.status).toBe(200);
    expect(modern.headers.get('content-type')).toMatch(/^application\/json/);
    const legacy = await post(
      tp.url,
      JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/list', params: {} }),
      { authorization: `Bearer ${org.token}` },
    );
    expect(legacy.status).toBe(200);
    expect(legacy.headers.get('content-type')).toMatch(/^application\/json/);
    expect(legacy.json.id).toBe(7);
    const note = await post(
      tp.url,
      JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }),
      { authorization: `Bearer ${org.token}` },
    );
    expect(note.status).toBe(202);
    expect(note.text).toBe('');
  });

  it('turns a refused route into a tool error with its code and sentence', async () => {
    const res = await post(
      tp.url,
      ...modernRequest(org.token, 'tools/call', {
        name: 'app_create',
        arguments: { name: 'Not A Name' },
      }),
    );
    expect(res.status).toBe(200);
    expect(res.json.result.isError).toBe(true);
    const answer = JSON.parse(res.json.result.content[0].text);
    expect(answer).toMatchObject({ status: 400, code: 'bad-request' });
    expect(answer.issues.length).toBeGreaterThan(0);
  });

  it('answers a plain tools/call (its fast path) exactly as the SDK answers it', async () => {
    await tp.request('POST', '/v1/apps', { token: org.token, body: { name: 'fast-same' } });
    // The Base64 form of the Mcp-Name header is the same call to the SDK, but sends it
    // past the fast path (mcp/fast-call.ts), which takes only a name equal to the body's.
    const base64 = (s: string) => `=?base64?${Buffer.from(s).toString('base64')}?=`;
    const cases: [string, Record<string, unknown>, number][] = [
      ['app_get', { name: 'fast-same' }, 7], // a result
      ['app_get', { name: 'fast-missing' }, 8], // a refused route: isError
      ['apps_list', {}, 9],
    ];
    for (const [name, args, id] of cases) {
      const [body, headers] = modernRequest(org.token, 'tools/call', { name, arguments: args }, id);
      const fast = await post(tp.url, body, headers);
      const sdk = await post(tp.url, body, { ...headers, 'mcp-name': base64(name) });
      expect(sdk.status).toBe(200);
      expect(fast.status).toBe(sdk.status);
      expect(fast.headers.get('content-type')).toBe(sdk.headers.get('content-type'));
      // The app's own fields are read twice; createdAt and the rest are the same.
      expect(fast.text).toBe(sdk.text);
    }
    const stringId = JSON.parse(modernRequest(org.token, 'tools/call', { name: 'apps_list' })[0]);
    stringId.id = 'call-1';
    const [, headers] = modernRequest(org.token, 'tools/call', { name: 'apps_list' });
    const fast = await post(tp.url, JSON.stringify(stringId), headers);
    const sdk = await post(tp.url, JSON.stringify(stringId), {
      ...headers,
      'mcp-name': base64('apps_list'),
    });
    expect(fast.text).toBe(sdk.text);
    expect(fast.json.id).toBe('call-1');
    // An envelope the SDK refuses is refused, however often a good one came before.
    const bad = JSON.parse(modernRequest(org.token, 'tools/call', { name: 'apps_list' })[0]);
    bad.params._meta['io.modelcontextprotocol/clientInfo'] = 5;
    const refused = await post(tp.url, JSON.stringify(bad), headers);
    expect(refused.status).toBe(400);
    expect(refused.json.error.code).toBe(-32602);
    const [good] = modernRequest(org.token, 'tools/call', { name: 'apps_list' });
    const oldRpc = await post(tp.url, good.replace('"2.0"', '"1.0"'), headers);
    expect(oldRpc.status).toBe(400);
    expect(oldRpc.json.error.code).toBe(-32600);
  });
});

describe('MCP bad input', () => {
  const auth = () => ({ authorization: `Bearer ${org.token}` });

  it('answers a parse error to malformed JSON and 415 to a body that is not JSON', async () => {
    const bad = await post(tp.url, '{"jsonrpc": "2.0", "id": 1, "meth', auth());
    expect(bad.status).toBe(400);
    expect(bad.json.error.code).toBe(-32700);
    const text = await post(tp.url, 'hello', { ...auth(), 'content-type': 'text/plain' });
    expect(text.status).toBe(415);
    const [body, headers] = modernRequest(org.token, 'tools/list');
    const labelled = await post(tp.url, body, { ...headers, 'content-type': 'text/plain' });
    expect(labelled.status).toBe(415);
  });

  it('refuses a JSON-RPC batch: one message per POST', async () => {
    const call = (id: number) => ({
      jsonrpc: '2.0',
      id,
      method: 'tools/call',
      params: { name: 'apps_list', arguments: {} },
    });
    const res = await post(tp.url, JSON.stringify([call(1), call(2)]), auth());
    expect(res.status).toBe(400);
    expect(res.json.error.code).toBe(-32600);
  });

  it('answers unknown methods and tools with their JSON-RPC errors', async () => {
    const method = await post(tp.url, ...modernRequest(org.token, 'nope/nothing'));
    expect(method.json.error.code).toBe(-32601);
    const tool = await post(
      tp.url,
      ...modernRequest(org.token, 'tools/call', {
        name: 'no_such_tool',
        arguments: {},
      }),
    );
    expect(tool.json.error.code).toBe(-32602);
    expect(tool.json.error.message).toContain('no_such_tool');
  });

  it('refuses protocol headers that disagree with the body', async () => {
    const [body, headers] = modernRequest(org.token, 'tools/list');
    const method = await post(tp.url, body, { ...headers, 'mcp-method': 'tools/call' });
    expect(method.status).toBe(400);
    expect(method.json.error.code).toBe(-32020);
    const [callBody, callHeaders] = modernRequest(org.token, 'tools/call', {
      name: 'apps_list',
      arguments: {},
    });
    const name = await post(tp.url, callBody, { ...callHeaders, 'mcp-name': 'app_delete' });
    expect(name.status).toBe(400);
    expect(name.json.error.code).toBe(-32020);
    // A modern protocol header on a request without the envelope.
    const bare = await post(
      tp.url,
      JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }),
      { ...auth(), 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'tools/list' },
    );
    expect(bare.status).toBe(400);
    expect(bare.json.error).toBeDefined();
  });

  it('refuses valid JSON that is no JSON-RPC message, and a protocol version it does not serve', async () => {
    const notRpc = await post(tp.url, JSON.stringify({ hello: 'world' }), auth());
    expect(notRpc.status).toBe(400);
    expect(notRpc.json.error.code).toBe(-32600);
    const noVersion = await post(
      tp.url,
      JSON.stringify({ jsonrpc: '1.0', id: 1, method: 'tools/list' }),
      auth(),
    );
    expect(noVersion.status).toBe(400);
    expect(noVersion.json.error).toBeDefined();
    const future = '2099-01-01';
    const [body, headers] = modernRequest(org.token, 'tools/list');
    const parsed = JSON.parse(body);
    parsed.params._meta['io.modelcontextprotocol/protocolVersion'] = future;
    const res = await post(tp.url, JSON.stringify(parsed), {
      ...headers,
      'mcp-protocol-version': future,
    });
    expect(res.status).toBe(400);
    expect(res.json.error.code).toBe(-32022);
  });

  it('answers arguments that break a tool’s input schema with a tool error, running nothing', async () => {
    const res = await post(
      tp.url,
      ...modernRequest(org.token, 'tools/call', {
        name: 'app_create',
        arguments: { name: 42 },
      }),
    );
    expect(res.status).toBe(200);
    expect(res.json.result.isError).toBe(true);
    expect(res.json.result.content[0].text).toMatch(/^Input validation error: .*name/);
    const apps = await tp.request('GET', '/v1/apps', { token: org.token });
    expect(JSON.stringify(apps.body)).not.toContain('"42"');
  });

  it('answers 405 to GET, PUT, PATCH and DELETE', async () => {
    for (const method of ['GET', 'PUT', 'PATCH', 'DELETE']) {
      const res = await fetch(`${tp.url}/v1/mcp`, { method, headers: auth() });
      expect(res.status, method).toBe(405);
      expect(res.headers.get('allow')).toBe('POST');
      expect(((await res.json()) as { code: string }).code).toBe('method-not-allowed');
    }
  });

  it('answers 401 with a Bearer challenge without a usable key', async () => {
    const [body] = modernRequest('x', 'tools/list');
    const tries: Record<string, string>[] = [{}, { authorization: 'Bearer pier_nope' }];
    for (const headers of tries) {
      const res = await post(tp.url, body, headers);
      expect(res.status).toBe(401);
      expect(res.json.code).toBe('unauthenticated');
      expect(res.headers.get('www-authenticate')).toMatch(/^Bearer/);
    }
  });

  it('refuses a browser origin other than the platform’s own', async () => {
    const [body, headers] = modernRequest(org.token, 'tools/list');
    const evil = await post(tp.url, body, { ...headers, origin: 'https://evil.example' });
    expect(evil.status).toBe(403);
    expect(evil.json.code).toBe('forbidden');
    const own = await post(tp.url, body, { ...headers, origin: new URL(tp.url).origin });
    expect(own.status).toBe(200);
  });

  it('refuses a read-only key: the endpoint is for full-access keys (spec 4.12: F)', async () => {
    const made = await tp.request('POST', '/v1/tokens', {
      token: org.token,
      body: { name: 'ro', scopes: ['read'] },
    });
    const res = await post(
      tp.url,
      ...modernRequest(made.body.token, 'tools/call', {
        name: 'app_create',
        arguments: { name: 'by-reader' },
      }),
    );
    expect(res.status).toBe(403);
    expect(res.json.code).toBe('token-scope');
    expect((await tp.request('GET', '/v1/apps/by-reader', { token: org.token })).status).toBe(404);
  });
});
