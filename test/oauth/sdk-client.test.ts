/**
 * A desktop MCP client's own OAuth, as the official SDK (`@modelcontextprotocol/client`
 * 2.x, pinned to 2026-07-28) does it, pointed at nothing but the URL: its first connect
 * meets the 401, discovers pier, registers, and sends the person to the authorization
 * URL; the person approves (here through the consent routes with their console key); the
 * client finishes with the code and then lists and calls tools with its tokens.
 */
import {
  Client,
  type OAuthClientProvider,
  StreamableHTTPClientTransport,
  UnauthorizedError,
} from '@modelcontextprotocol/client';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTestPlatform, type TestOrg, type TestPlatform } from '../helpers/platform.js';
import { MODERN } from '../mcp/helpers.js';
import { consoleKey, decide, requestIdOf } from './helpers.js';

const REDIRECT = 'http://127.0.0.1:7780/callback';

let tp: TestPlatform;
let org: TestOrg;
let key: string;

beforeAll(async () => {
  tp = await startTestPlatform();
  org = await tp.createOrg();
  key = await consoleKey(tp, org.id, 'sdk@example.com');
});
afterAll(async () => tp?.close());

/** What a desktop client keeps between runs, in memory. */
function memoryProvider() {
  const kept: {
    info?: Awaited<ReturnType<OAuthClientProvider['clientInformation']>>;
    tokens?: Awaited<ReturnType<OAuthClientProvider['tokens']>>;
    verifier?: string;
    authorizationUrl?: URL;
  } = {};
  const provider: OAuthClientProvider = {
    get redirectUrl() {
      return REDIRECT;
    },
    get clientMetadata() {
      return {
        client_name: 'SDK desktop client',
        redirect_uris: [REDIRECT],
        grant_types: ['authorization_code', 'refresh_token'],
        response_types: ['code'],
        token_endpoint_auth_method: 'none',
        scope: 'mcp offline_access',
      };
    },
    clientInformation: () => kept.info,
    saveClientInformation: (info) => void (kept.info = info),
    tokens: () => kept.tokens,
    saveTokens: (tokens) => void (kept.tokens = tokens),
    redirectToAuthorization: (url) => void (kept.authorizationUrl = url),
    saveCodeVerifier: (v) => void (kept.verifier = v),
    codeVerifier: () => kept.verifier!,
  };
  return { provider, kept };
}

const newClient = () =>
  new Client(
    { name: 'sdk-oauth', version: '1' },
    { versionNegotiation: { mode: { pin: MODERN } } },
  );

it('connects the SDK’s OAuth client through consent and calls a tool', async () => {
  const { provider, kept } = memoryProvider();
  const url = new URL(`${tp.url}/v1/mcp`);
  const first = new StreamableHTTPClientTransport(url, { authProvider: provider });
  await expect(newClient().connect(first)).rejects.toBeInstanceOf(UnauthorizedError);
  expect(kept.info?.client_id).toMatch(/^mcpc-/);
  const authorizationUrl = kept.authorizationUrl!;
  expect(authorizationUrl.searchParams.get('resource')).toBe(url.href);

  const requestId = await requestIdOf(authorizationUrl.href);
  const callback = await decide(tp, key, { requestId, approve: true });
  expect(callback.searchParams.get('iss')).toBe(tp.url);
  await first.finishAuth(callback.searchParams);
  expect(kept.tokens?.refresh_token).toMatch(/^pierr_/);

  const client = newClient();
  await client.connect(new StreamableHTTPClientTransport(url, { authProvider: provider }));
  try {
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name)).toContain('apps_list');
    const listed = await client.callTool({ name: 'apps_list', arguments: {} });
    expect(listed.isError).toBeFalsy();
  } finally {
    await client.close();
  }
});
