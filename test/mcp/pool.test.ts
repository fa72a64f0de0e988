/**
 * MCP servers are kept between exchanges (mcp/server.ts): nothing of one caller may
 * reach another's exchange. Two organizations call at once, in both protocol eras, and
 * each sees its own apps only; an agent token's refusal is its own.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTestPlatform, type TestOrg, type TestPlatform } from '../helpers/platform.js';
import { modernRequest, post } from './helpers.js';

let tp: TestPlatform;
let a: TestOrg;
let b: TestOrg;

beforeAll(async () => {
  tp = await startTestPlatform();
  a = await tp.createOrg();
  b = await tp.createOrg();
  await tp.request('POST', '/v1/apps', { token: a.token, body: { name: 'pool-a' } });
  await tp.request('POST', '/v1/apps', { token: b.token, body: { name: 'pool-b' } });
});
afterAll(async () => tp?.close());

const modern = (token: string) =>
  post(tp.url, ...modernRequest(token, 'tools/call', { name: 'apps_list', arguments: {} }));
const legacy = (token: string) =>
  post(
    tp.url,
    JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'tools/call',
      params: { name: 'apps_list', arguments: {} },
    }),
    { authorization: `Bearer ${token}` },
  );

it('keeps each exchange to its own caller while servers are reused', async () => {
  const prod = await tp.request('POST', '/v1/tokens', {
    token: a.token,
    body: { name: 'pool agent', agent: { class: 'production', apps: ['pool-a'] } },
  });
  const callers = [
    { token: a.token, own: 'pool-a', other: 'pool-b' },
    { token: b.token, own: 'pool-b', other: 'pool-a' },
  ];
  const rounds = await Promise.all(
    Array.from({ length: 30 }, (_, i) => {
      const c = callers[i % 2]!;
      return (i % 3 === 0 ? legacy : modern)(c.token).then((res) => ({ c, res }));
    }),
  );
  for (const { c, res } of rounds) {
    expect(res.status).toBe(200);
    const text = res.json.result.content[0].text as string;
    expect(text).toContain(c.own);
    expect(text).not.toContain(c.other);
  }
  // An agent's refusal and another caller's success, interleaved.
  const [refused, allowed] = await Promise.all([
    post(
      tp.url,
      ...modernRequest(prod.body.token, 'tools/call', {
        name: 'app_create',
        arguments: { name: 'pool-new' },
      }),
    ),
    post(
      tp.url,
      ...modernRequest(b.token, 'tools/call', {
        name: 'app_create',
        arguments: { name: 'pool-b2' },
      }),
    ),
  ]);
  expect(refused.json.result.isError).toBe(true);
  expect(refused.json.result.content[0].text).toContain('agent-token-production-readonly');
  expect(allowed.json.result.isError).toBeFalsy();
});
