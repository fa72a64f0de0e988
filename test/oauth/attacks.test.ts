/**
 * OAuth as an attacker sees it: another organization's consent request, keys that may
 * not decide, PKCE and redirect URI mismatches, a code used twice, a request past its
 * time, grants that keep a client to reading or to one app, a revoked grant, bad
 * registrations, and the per-address limit shared through PostgreSQL.
 */
import type * as oauth from 'oauth4webapi';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, type TestOrg, type TestPlatform } from '../helpers/platform.js';
import { modernRequest, post } from '../mcp/helpers.js';
import {
  consoleKey,
  decide,
  discover,
  fullLogin,
  register,
  requestIdOf,
  startLogin,
  tokenPost,
} from './helpers.js';

const REDIRECT = 'http://127.0.0.1:7778/cb';

let tp: TestPlatform;
let org: TestOrg;
let other: TestOrg;
let key: string;
let otherKey: string;
let as: oauth.AuthorizationServer;
let client: oauth.Client;
/** Moves the platform's clock forward (request and code expiry). */
let offsetMs = 0;

/** Calls one MCP tool with a raw 2026-07-28 POST; the tool's answer and whether it failed. */
async function tool(token: string, name: string, args: Record<string, unknown>) {
  const res = await post(tp.url, ...modernRequest(token, 'tools/call', { name, arguments: args }));
  expect(res.status, res.text).toBe(200);
  const result = res.json.result as { isError?: boolean; content: { text: string }[] };
  return { isError: result.isError === true, text: result.content[0]!.text };
}

/** The HTTP status /v1/mcp answers a token with (the token works on no other route). */
async function mcpStatus(token: string): Promise<number> {
  return (await post(tp.url, ...modernRequest(token, 'tools/list'))).status;
}

beforeAll(async () => {
  tp = await startTestPlatform({}, { clock: () => new Date(Date.now() + offsetMs) });
  org = await tp.createOrg();
  other = await tp.createOrg();
  key = await consoleKey(tp, org.id, 'mine@example.com');
  otherKey = await consoleKey(tp, other.id, 'theirs@example.com');
  for (const name of ['att-web', 'att-db']) {
    expect(
      (await tp.request('POST', '/v1/apps', { token: org.token, body: { name } })).status,
    ).toBe(201);
  }
  as = await discover(tp.url);
  client = await register(as, REDIRECT);
});
afterAll(async () => tp?.close());

describe('consent', () => {
  it('answers another organization 404 for a request this one decided', async () => {
    const login = await startLogin(as, client, REDIRECT);
    const requestId = await requestIdOf(login.authorizeUrl);
    await decide(tp, key, { requestId, approve: false });
    const asked: [string, Record<string, unknown>][] = [
      ['/v1/oauth/consent/lookup', { requestId }],
      ['/v1/oauth/consent/decide', { requestId, approve: true }],
    ];
    for (const [path, body] of asked) {
      const res = await tp.request('POST', path, { token: otherKey, body });
      expect([res.status, res.body.code]).toEqual([404, 'not-found']);
    }
    const again = await tp.request('POST', '/v1/oauth/consent/decide', {
      token: key,
      body: { requestId, approve: true },
    });
    expect(again.status).toBe(409);
    expect(again.body.code).toBe('not-answerable');
  });

  it('sends a denial back with access_denied, state and iss', async () => {
    const login = await startLogin(as, client, REDIRECT);
    const requestId = await requestIdOf(login.authorizeUrl);
    const back = await decide(tp, key, { requestId, approve: false });
    expect(back.origin + back.pathname).toBe(REDIRECT);
    expect(Object.fromEntries(back.searchParams)).toMatchObject({
      error: 'access_denied',
      state: login.state,
      iss: tp.url,
    });
  });

  it('lets neither a read-only key nor an agent token decide', async () => {
    const requestId = await requestIdOf((await startLogin(as, client, REDIRECT)).authorizeUrl);
    const readOnly = await tp.request('POST', '/v1/tokens', {
      token: org.token,
      body: { name: 'reader', scopes: ['read'] },
    });
    const agent = await tp.request('POST', '/v1/tokens', {
      token: org.token,
      body: { name: 'agent', agent: { class: 'sandbox' } },
    });
    const asReader = await tp.request('POST', '/v1/oauth/consent/decide', {
      token: readOnly.body.token,
      body: { requestId, approve: true },
    });
    expect([asReader.status, asReader.body.code]).toEqual([403, 'token-scope']);
    const asAgent = await tp.request('POST', '/v1/oauth/consent/decide', {
      token: agent.body.token,
      body: { requestId, approve: true, agentClass: 'sandbox' },
    });
    expect([asAgent.status, asAgent.body.code]).toEqual([403, 'agent-token-credential']);
  });

  it('refuses a request past its ten minutes as not-answerable', async () => {
    const requestId = await requestIdOf((await startLogin(as, client, REDIRECT)).authorizeUrl);
    offsetMs = 11 * 60_000;
    try {
      const res = await tp.request('POST', '/v1/oauth/consent/lookup', {
        token: key,
        body: { requestId },
      });
      expect([res.status, res.body.code]).toEqual([409, 'not-answerable']);
    } finally {
      offsetMs = 0;
    }
  });

  it('reports every wrong choice at once', async () => {
    const requestId = await requestIdOf((await startLogin(as, client, REDIRECT)).authorizeUrl);
    const res = await tp.request('POST', '/v1/oauth/consent/decide', {
      token: key,
      body: {
        requestId,
        approve: true,
        agentClass: 'root',
        apps: [],
        expiresInDays: 1000,
      },
    });
    expect(res.status).toBe(400);
    expect(res.body.issues.map((i: { path: string }) => i.path).sort()).toEqual([
      'agentClass',
      'apps',
      'expiresInDays',
    ]);
  });
});

describe('authorize', () => {
  it('never redirects to a URI the client did not register', async () => {
    const login = await startLogin(as, client, 'http://evil.example/cb');
    const res = await fetch(login.authorizeUrl, { redirect: 'manual' });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { issues: { path: string }[] }).issues[0]!.path).toBe(
      'redirect_uri',
    );
    const unknown = await fetch(
      `${tp.url}/v1/oauth/authorize?client_id=mcpc-nobody&redirect_uri=${encodeURIComponent(REDIRECT)}`,
      { redirect: 'manual' },
    );
    expect(unknown.status).toBe(400);
  });

  it('sends errors after the redirect URI is trusted back to it', async () => {
    const cases: [Record<string, string>, string][] = [
      [{ code_challenge_method: 'plain' }, 'invalid_request'],
      [{ code_challenge: '' }, 'invalid_request'],
      [{ response_type: 'token' }, 'unsupported_response_type'],
      [{ resource: 'https://elsewhere.example/mcp' }, 'invalid_target'],
    ];
    for (const [params, error] of cases) {
      const login = await startLogin(as, client, REDIRECT, params);
      const res = await fetch(login.authorizeUrl, { redirect: 'manual' });
      expect(res.status).toBe(302);
      const to = new URL(res.headers.get('location')!);
      expect(to.origin + to.pathname).toBe(REDIRECT);
      expect(Object.fromEntries(to.searchParams)).toMatchObject({
        error,
        state: login.state,
        iss: tp.url,
      });
    }
  });
});

describe('token endpoint', () => {
  async function approvedCode(redirect = REDIRECT) {
    const login = await startLogin(as, client, redirect);
    const requestId = await requestIdOf(login.authorizeUrl);
    const back = await decide(tp, key, { requestId, approve: true });
    return { login, code: back.searchParams.get('code')! };
  }

  it('refuses a wrong verifier, and the code is spent by the try', async () => {
    const { code, login } = await approvedCode();
    const form = {
      grant_type: 'authorization_code',
      code,
      client_id: client.client_id,
      redirect_uri: REDIRECT,
    };
    const wrong = await tokenPost(tp.url, { ...form, code_verifier: 'x'.repeat(43) });
    expect([wrong.status, wrong.body.error]).toEqual([400, 'invalid_grant']);
    expect(wrong.headers.get('cache-control')).toBe('no-store');
    const right = await tokenPost(tp.url, { ...form, code_verifier: login.verifier });
    expect(right.body.error).toBe('invalid_grant');
  });

  it('refuses a redirect_uri other than the authorization’s', async () => {
    const { code, login } = await approvedCode();
    const res = await tokenPost(tp.url, {
      grant_type: 'authorization_code',
      code,
      code_verifier: login.verifier,
      client_id: client.client_id,
      redirect_uri: 'http://127.0.0.1:7778/other',
    });
    expect(res.body).toMatchObject({ error: 'invalid_grant' });
  });

  it('revokes what a code issued when the code comes again', async () => {
    const { code, login } = await approvedCode();
    const form = {
      grant_type: 'authorization_code',
      code,
      code_verifier: login.verifier,
      client_id: client.client_id,
      redirect_uri: REDIRECT,
    };
    const first = await tokenPost(tp.url, form);
    expect(first.status).toBe(200);
    expect(await mcpStatus(first.body.access_token)).toBe(200);
    const second = await tokenPost(tp.url, form);
    expect(second.body.error).toBe('invalid_grant');
    expect(await mcpStatus(first.body.access_token)).toBe(401);
  });

  it('refuses a code past its 60 seconds', async () => {
    const { code, login } = await approvedCode();
    offsetMs = 61_000;
    try {
      const res = await tokenPost(tp.url, {
        grant_type: 'authorization_code',
        code,
        code_verifier: login.verifier,
        client_id: client.client_id,
        redirect_uri: REDIRECT,
      });
      expect(res.body.error).toBe('invalid_grant');
    } finally {
      offsetMs = 0;
    }
  });

  it('lets an access token run out after an hour; a refresh brings the next', async () => {
    const tokens = await fullLogin(tp, as, client, REDIRECT, key, {
      agentClass: 'sandbox',
      apps: ['att-db'],
    });
    const oauthKeys = async () =>
      (await tp.request('GET', '/v1/tokens', { token: org.token })).body.filter(
        (k: { name: string; agent?: { apps?: string[] } }) =>
          k.name.startsWith('OAuth:') && k.agent?.apps?.[0] === 'att-db',
      );
    expect(await oauthKeys()).toHaveLength(1);
    offsetMs = 61 * 60_000;
    try {
      expect(await mcpStatus(tokens.access_token)).toBe(401);
      const next = await tokenPost(tp.url, {
        grant_type: 'refresh_token',
        refresh_token: tokens.refresh_token!,
        client_id: client.client_id,
      });
      expect(next.status).toBe(200);
      expect(await mcpStatus(next.body.access_token)).toBe(200);
      // The spent access token leaves the key list: an hourly refresh does not fill it.
      expect(await oauthKeys()).toHaveLength(1);
    } finally {
      offsetMs = 0;
    }
  });

  it('gives no refresh token without offline_access; the grant ends with its access token', async () => {
    const login = await startLogin(as, client, REDIRECT, { scope: 'mcp' });
    const requestId = await requestIdOf(login.authorizeUrl);
    const back = await decide(tp, key, { requestId, approve: true, expiresInDays: 90 });
    const res = await tokenPost(tp.url, {
      grant_type: 'authorization_code',
      code: back.searchParams.get('code')!,
      code_verifier: login.verifier,
      client_id: client.client_id,
      redirect_uri: REDIRECT,
    });
    expect(res.body).toMatchObject({ scope: 'mcp', expires_in: 3600 });
    expect(res.body.refresh_token).toBeUndefined();
    const grants = await tp.request('GET', '/v1/oauth/grants', { token: key });
    const grant = grants.body.find((g: { scopes: string[] }) => g.scopes.join(' ') === 'mcp');
    expect(Date.parse(grant.expiresAt) - Date.now()).toBeLessThan(3700_000);
  });

  it('answers malformed requests in OAuth’s shape', async () => {
    expect((await tokenPost(tp.url, { grant_type: 'password' })).body.error).toBe(
      'unsupported_grant_type',
    );
    expect((await tokenPost(tp.url, { grant_type: 'authorization_code' })).body.error).toBe(
      'invalid_request',
    );
    const json = await fetch(`${tp.url}/v1/oauth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"grant_type":"refresh_token"}',
    });
    expect(json.status).toBe(400);
    expect(((await json.json()) as { error: string }).error).toBe('invalid_request');
  });
});

describe('what a grant lets a client do', () => {
  it('keeps the preselected production class to reading tools', async () => {
    const tokens = await fullLogin(tp, as, client, REDIRECT, key);
    const write = await tool(tokens.access_token, 'app_create', { name: 'by-prod' });
    expect(write.isError).toBe(true);
    expect(write.text).toContain('agent-token-production-readonly');
    expect((await tool(tokens.access_token, 'apps_list', {})).isError).toBe(false);
  });

  it('answers its access token on /v1/mcp only (RFC 8707), however the header is dressed', async () => {
    const tokens = await fullLogin(tp, as, client, REDIRECT, key);
    expect((await tool(tokens.access_token, 'apps_list', {})).isError).toBe(false);
    const dressings: Record<string, string>[] = [{}, { 'x-pier-mcp-call': 'a guess' }];
    for (const headers of dressings) {
      const direct = await tp.request('GET', '/v1/apps', {
        token: tokens.access_token,
        headers,
      });
      expect(direct.status).toBe(403);
      expect(direct.body.code).toBe('token-scope');
      expect(direct.body.error).toContain('/v1/mcp only');
    }
  });

  it('keeps an app-limited grant to its apps', async () => {
    const tokens = await fullLogin(tp, as, client, REDIRECT, key, {
      agentClass: 'sandbox',
      apps: ['att-web'],
    });
    const mine = await tool(tokens.access_token, 'secrets_set', {
      app: 'att-web',
      secrets: { A: '1' },
    });
    expect(mine.isError, mine.text).toBe(false);
    const theirs = await tool(tokens.access_token, 'secrets_set', {
      app: 'att-db',
      secrets: { A: '1' },
    });
    expect(theirs.isError).toBe(true);
    expect(theirs.text).toContain('agent-token-app-scope');
  });

  it('ends every token of a revoked grant at once; another org cannot revoke it', async () => {
    const tokens = await fullLogin(tp, as, client, REDIRECT, key, { agentClass: 'twin' });
    const grants = await tp.request('GET', '/v1/oauth/grants', { token: key });
    const grant = grants.body.find((g: any) => g.agent.class === 'twin');
    expect(grant).toMatchObject({ clientId: client.client_id, scopes: ['mcp', 'offline_access'] });
    const foreign = await tp.request('DELETE', `/v1/oauth/grants/${grant.id}`, {
      token: other.token,
    });
    expect(foreign.status).toBe(404);
    expect(
      (await tp.request('DELETE', `/v1/oauth/grants/${grant.id}`, { token: key })).status,
    ).toBe(204);
    const res = await post(tp.url, ...modernRequest(tokens.access_token, 'tools/list'));
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).toBe(
      `Bearer error="invalid_token", resource_metadata="${tp.url}/.well-known/oauth-protected-resource/v1/mcp"`,
    );
    const refreshed = await tokenPost(tp.url, {
      grant_type: 'refresh_token',
      refresh_token: tokens.refresh_token!,
      client_id: client.client_id,
    });
    expect(refreshed.body.error).toBe('invalid_grant');
  });
});

describe('registration', () => {
  it('refuses a redirect URI that is neither https nor loopback', async () => {
    const res = await tp.request('POST', '/v1/oauth/register', {
      body: { redirect_uris: ['http://evil.example/cb'] },
    });
    expect([res.status, res.body.code]).toEqual([400, 'bad-request']);
    expect(res.body.issues[0].path).toBe('redirect_uris.0');
  });

  it('reports every problem of a bad body at once', async () => {
    const res = await tp.request('POST', '/v1/oauth/register', {
      body: {
        redirect_uris: ['https://ok.example/cb#frag', 'ftp://x'],
        client_name: '',
        token_endpoint_auth_method: 'client_secret_basic',
        grant_types: ['client_credentials'],
        response_types: ['token'],
        scope: 'x'.repeat(201),
      },
    });
    expect(res.status).toBe(400);
    expect(res.body.issues.map((i: { path: string }) => i.path).sort()).toEqual([
      'client_name',
      'grant_types.0',
      'redirect_uris.0',
      'redirect_uris.1',
      'response_types.0',
      'scope',
      'token_endpoint_auth_method',
    ]);
  });

  it('limits each entrance per address across replicas (429 with Retry-After)', async () => {
    const entrances: [string, number, () => Promise<Response>][] = [
      [
        'register',
        20,
        () =>
          fetch(`${tp.url}/v1/oauth/register`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ redirect_uris: [REDIRECT] }),
          }),
      ],
      ['authorize', 30, () => fetch(`${tp.url}/v1/oauth/authorize`, { redirect: 'manual' })],
      [
        'token',
        120,
        () =>
          fetch(`${tp.url}/v1/oauth/token`, {
            method: 'POST',
            headers: { 'content-type': 'application/x-www-form-urlencoded' },
            body: 'grant_type=refresh_token',
          }),
      ],
    ];
    // Another replica's hits: the current and the next window are full (a minute may turn
    // while the test runs).
    const minute = Math.floor(Date.now() / 60_000) * 60_000;
    for (const [name, limit, hit] of entrances) {
      for (const start of [minute, minute + 60_000]) {
        await tp.platform.ctx.db
          .insertInto('entrance_rate_windows')
          .values({ bucket: `oauth-${name}:127.0.0.1`, window_start: new Date(start), hits: limit })
          .onConflict((oc) => oc.columns(['bucket', 'window_start']).doUpdateSet({ hits: limit }))
          .execute();
      }
      const res = await hit();
      expect(res.status, name).toBe(429);
      expect(((await res.json()) as { code: string }).code).toBe('rate-limited');
      expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
    }
  });
});
