/**
 * The whole OAuth 2.1 flow of a hosted MCP client with oauth4webapi (issue 15): discovery
 * from the MCP endpoint's 401, dynamic registration, PKCE, consent through the spec routes
 * with a person's console key, the code exchange, a tool call on /v1/mcp with the access
 * token, refresh rotation, and reuse of a spent refresh token revoking the grant.
 */
import * as oauth from 'oauth4webapi';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, type TestOrg, type TestPlatform } from '../helpers/platform.js';
import { modernClient } from '../mcp/helpers.js';
import {
  consoleKey,
  decide,
  discover,
  exchange,
  insecure,
  register,
  requestIdOf,
  startLogin,
  tokenPost,
} from './helpers.js';

const REDIRECT = 'http://127.0.0.1:7777/callback';

let tp: TestPlatform;
let org: TestOrg;
let key: string;

beforeAll(async () => {
  tp = await startTestPlatform();
  org = await tp.createOrg();
  key = await consoleKey(tp, org.id, 'flow@example.com');
  expect(
    (await tp.request('POST', '/v1/apps', { token: org.token, body: { name: 'flow-web' } })).status,
  ).toBe(201);
});
afterAll(async () => tp?.close());

describe('OAuth for hosted MCP clients', () => {
  it('points a client without a token from /v1/mcp to the metadata', async () => {
    const res = await fetch(`${tp.url}/v1/mcp`, { method: 'POST', body: '{}' });
    expect(res.status).toBe(401);
    const metaUrl = `${tp.url}/.well-known/oauth-protected-resource/v1/mcp`;
    expect(res.headers.get('www-authenticate')).toBe(`Bearer resource_metadata="${metaUrl}"`);

    const resource = new URL(`${tp.url}/v1/mcp`);
    const rs = await oauth.processResourceDiscoveryResponse(
      resource,
      await oauth.resourceDiscoveryRequest(resource, insecure),
    );
    expect(rs).toMatchObject({
      authorization_servers: [tp.url],
      scopes_supported: ['mcp', 'offline_access'],
      bearer_methods_supported: ['header'],
    });
    const as = await discover(rs.authorization_servers![0]!);
    expect(as).toMatchObject({
      issuer: tp.url,
      code_challenge_methods_supported: ['S256'],
      token_endpoint_auth_methods_supported: ['none'],
      response_types_supported: ['code'],
      authorization_response_iss_parameter_supported: true,
      client_id_metadata_document_supported: true,
    });

    const bad = await fetch(`${tp.url}/v1/mcp`, {
      method: 'POST',
      body: '{}',
      headers: { authorization: 'Bearer pier_nope' },
    });
    expect(bad.status).toBe(401);
    expect(bad.headers.get('www-authenticate')).toBe(
      `Bearer error="invalid_token", resource_metadata="${metaUrl}"`,
    );
  });

  it('registers, logs in with PKCE, calls a tool, rotates and catches a reused refresh token', async () => {
    const as = await discover(tp.url);
    const client = await register(as, REDIRECT);
    expect(client.client_id).toMatch(/^mcpc-/);
    expect(client.token_endpoint_auth_method).toBe('none');

    const login = await startLogin(as, client, REDIRECT, { scope: 'mcp offline_access unknown:x' });
    const requestId = await requestIdOf(login.authorizeUrl);
    const look = await tp.request('POST', '/v1/oauth/consent/lookup', {
      token: key,
      body: { requestId },
    });
    expect(look.status).toBe(200);
    expect(look.body).toMatchObject({
      requestId,
      client: {
        id: client.client_id,
        name: 'Test MCP client',
        verified: false,
        redirectHost: '127.0.0.1:7777',
      },
      // The unknown scope is ignored, not granted, and does not break the login.
      scopes: ['mcp', 'offline_access'],
      choices: { agentClass: 'production', apps: ['flow-web'], prodDataRead: false },
    });

    const callback = await decide(tp, key, {
      requestId,
      approve: true,
      agentClass: 'sandbox',
      expiresInDays: 7,
    });
    expect(callback.searchParams.get('iss')).toBe(tp.url);
    expect(callback.searchParams.get('state')).toBe(login.state);
    const tokens = await exchange(as, client, callback, login, REDIRECT);
    expect(tokens.token_type).toBe('bearer');
    expect(tokens.expires_in).toBe(3600);
    expect(tokens.scope).toBe('mcp offline_access');
    expect(tokens.refresh_token).toMatch(/^pierr_/);

    // The access token is an agent key of the person's organization, with the choice.
    const listed = await tp.request('GET', '/v1/tokens', { token: org.token });
    const agentKey = listed.body.find((k: any) => k.name === 'OAuth: Test MCP client');
    expect(agentKey).toMatchObject({ agent: { class: 'sandbox' }, userId: expect.any(String) });

    const mcp = await modernClient(tp.url, tokens.access_token);
    try {
      const made = await mcp.callTool({ name: 'app_create', arguments: { name: 'by-oauth' } });
      expect(made.isError, JSON.stringify(made.content)).toBeFalsy();
    } finally {
      await mcp.close();
    }
    const audit = await tp.request('GET', `/v1/agent-actions?token=${agentKey.id}`, {
      token: org.token,
    });
    expect(audit.body.length).toBeGreaterThan(0);

    // Rotation: each refresh spends the token it shows and hands out the next.
    const second = await oauth.processRefreshTokenResponse(
      as,
      client,
      await oauth.refreshTokenGrantRequest(
        as,
        client,
        oauth.None(),
        tokens.refresh_token!,
        insecure,
      ),
    );
    expect(second.refresh_token).not.toBe(tokens.refresh_token);
    expect(second.access_token).not.toBe(tokens.access_token);
    const third = await oauth.processRefreshTokenResponse(
      as,
      client,
      await oauth.refreshTokenGrantRequest(
        as,
        client,
        oauth.None(),
        second.refresh_token!,
        insecure,
      ),
    );

    // The spent first refresh token again: it leaked; the whole grant goes (RFC 9700).
    const reused = await tokenPost(tp.url, {
      grant_type: 'refresh_token',
      refresh_token: tokens.refresh_token!,
      client_id: client.client_id,
    });
    expect(reused.status).toBe(400);
    expect(reused.body.error).toBe('invalid_grant');
    const after = await tokenPost(tp.url, {
      grant_type: 'refresh_token',
      refresh_token: third.refresh_token!,
      client_id: client.client_id,
    });
    expect(after.body.error).toBe('invalid_grant');
    for (const t of [tokens.access_token, second.access_token, third.access_token]) {
      const res = await fetch(`${tp.url}/v1/mcp`, {
        method: 'POST',
        body: '{}',
        headers: { authorization: `Bearer ${t}` },
      });
      expect(res.status).toBe(401);
      expect(res.headers.get('www-authenticate')).toContain('error="invalid_token"');
    }
    const grants = await tp.request('GET', '/v1/oauth/grants', { token: org.token });
    expect(grants.body).toEqual([]);
  });
});
