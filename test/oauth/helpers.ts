/**
 * An OAuth client nobody here wrote (oauth4webapi) against a test platform: discovery,
 * registration, the authorize redirect into the console, consent through the spec routes
 * with a person's console key, and the token endpoint.
 */
import * as oauth from 'oauth4webapi';
import { expect } from 'vitest';
import type { TestPlatform } from '../helpers/platform.js';
import { addPerson, PASSWORD } from '../console/console-client.js';

/** pier runs on plain http in tests: oauth4webapi refuses that unless told. */
export const insecure = { [oauth.allowInsecureRequests]: true } as const;

export async function discover(url: string): Promise<oauth.AuthorizationServer> {
  const issuer = new URL(url);
  return oauth.processDiscoveryResponse(
    issuer,
    await oauth.discoveryRequest(issuer, { algorithm: 'oauth2', ...insecure }),
  );
}

export async function register(
  as: oauth.AuthorizationServer,
  redirectUri: string,
  extra: Record<string, unknown> = {},
): Promise<oauth.Client> {
  return oauth.processDynamicClientRegistrationResponse(
    await oauth.dynamicClientRegistrationRequest(
      as,
      {
        redirect_uris: [redirectUri],
        client_name: 'Test MCP client',
        token_endpoint_auth_method: 'none',
        grant_types: ['authorization_code', 'refresh_token'],
        response_types: ['code'],
        ...extra,
      },
      insecure,
    ),
  ) as Promise<oauth.Client>;
}

/** A person of `orgId` signed in to the console: their console key. */
export async function consoleKey(tp: TestPlatform, orgId: string, email: string): Promise<string> {
  await addPerson(tp, orgId, email);
  const res = await tp.request('POST', '/console/api/sign-in', {
    body: { email, password: PASSWORD },
  });
  expect(res.status).toBe(200);
  return res.body.token as string;
}

export interface Login {
  verifier: string;
  state: string;
  authorizeUrl: string;
}

/** The authorize URL of a fresh login with PKCE and state. */
export async function startLogin(
  as: oauth.AuthorizationServer,
  client: oauth.Client,
  redirectUri: string,
  params: Record<string, string> = {},
): Promise<Login> {
  const verifier = oauth.generateRandomCodeVerifier();
  const state = oauth.generateRandomState();
  const url = new URL(as.authorization_endpoint!);
  url.search = new URLSearchParams({
    client_id: client.client_id,
    redirect_uri: redirectUri,
    response_type: 'code',
    code_challenge: await oauth.calculatePKCECodeChallenge(verifier),
    code_challenge_method: 'S256',
    scope: 'mcp offline_access',
    state,
    resource: `${as.issuer}/v1/mcp`,
    ...params,
  }).toString();
  return { verifier, state, authorizeUrl: url.toString() };
}

/** Follows authorize to the console and reads the consent request's id off the address. */
export async function requestIdOf(authorizeUrl: string): Promise<string> {
  const res = await fetch(authorizeUrl, { redirect: 'manual' });
  expect(res.status, await res.clone().text()).toBe(302);
  const to = new URL(res.headers.get('location')!);
  expect(to.pathname).toBe('/console/oauth/consent');
  return to.searchParams.get('requestId')!;
}

/** Decides a consent request through the spec route; the answer's redirect URL. */
export async function decide(
  tp: TestPlatform,
  key: string,
  body: Record<string, unknown>,
): Promise<URL> {
  const res = await tp.request('POST', '/v1/oauth/consent/decide', { token: key, body });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return new URL(res.body.redirectUrl as string);
}

/** Exchanges the callback's code (with the verifier) for tokens. */
export async function exchange(
  as: oauth.AuthorizationServer,
  client: oauth.Client,
  callback: URL,
  login: Login,
  redirectUri: string,
): Promise<oauth.TokenEndpointResponse> {
  const params = oauth.validateAuthResponse(as, client, callback, login.state);
  const res = await oauth.authorizationCodeGrantRequest(
    as,
    client,
    oauth.None(),
    params,
    redirectUri,
    login.verifier,
    { ...insecure, additionalParameters: { resource: `${as.issuer}/v1/mcp` } },
  );
  return oauth.processAuthorizationCodeResponse(as, client, res);
}

/** The whole login with the given choices: tokens and the grant's id. */
export async function fullLogin(
  tp: TestPlatform,
  as: oauth.AuthorizationServer,
  client: oauth.Client,
  redirectUri: string,
  key: string,
  choices: Record<string, unknown> = {},
): Promise<oauth.TokenEndpointResponse> {
  const login = await startLogin(as, client, redirectUri);
  const requestId = await requestIdOf(login.authorizeUrl);
  const callback = await decide(tp, key, { requestId, approve: true, ...choices });
  return exchange(as, client, callback, login, redirectUri);
}

/** A raw form post to the token endpoint: status and JSON answer. */
export async function tokenPost(url: string, form: Record<string, string>) {
  const res = await fetch(`${url}/v1/oauth/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams(form).toString(),
  });
  return {
    status: res.status,
    body: (await res.json()) as Record<string, any>,
    headers: res.headers,
  };
}
