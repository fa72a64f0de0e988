/**
 * Registry authentication (the "token authentication specification" of distribution):
 * a 401 carries `WWW-Authenticate: Bearer realm=…,service=…,scope=…`; we GET the realm
 * with those as query parameters (with basic credentials when we have some) and retry
 * with `Authorization: Bearer <token>`. A `Basic` challenge is answered with the
 * credentials directly. The realm is the one other host we ever contact on our own.
 */
import { ImageError } from './errors.js';
import { readLimited, send, type TransportOptions } from './http.js';

/** Registry credentials, as `docker login` would take them. */
export interface Credentials {
  username: string;
  password: string;
}

/** One parsed challenge: its scheme (lowercased) and parameters. */
export interface Challenge {
  scheme: string;
  params: Record<string, string>;
}

/**
 * Parses a `WWW-Authenticate` value holding one challenge. Parameter values may be quoted
 * and quoted values may hold commas (scopes do: `repository:a:pull,push`).
 */
export function parseChallenge(header: string): Challenge | undefined {
  const m = /^\s*([A-Za-z][\w-]*)\s*(.*)$/s.exec(header);
  if (!m) return undefined;
  const params: Record<string, string> = {};
  const re = /([\w-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,"]*))\s*,?/g;
  for (const p of m[2]!.matchAll(re)) {
    params[p[1]!.toLowerCase()] = p[2] !== undefined ? p[2].replace(/\\(.)/g, '$1') : p[3]!;
  }
  return { scheme: m[1]!.toLowerCase(), params };
}

/** `Authorization` value for basic credentials. */
export function basicAuth(c: Credentials): string {
  return `Basic ${Buffer.from(`${c.username}:${c.password}`, 'utf8').toString('base64')}`;
}

const MAX_TOKEN_RESPONSE = 1024 * 1024;

/**
 * Asks a Bearer challenge's realm for a token. `fallbackScope` is used when the challenge
 * names none (registries answering `GET /v2/`). Refusal (401/403) → `unauthorized`.
 */
export async function fetchToken(
  challenge: Challenge,
  fallbackScope: string,
  credentials: Credentials | undefined,
  registryHost: string,
  transport: TransportOptions,
): Promise<string> {
  const realm = challenge.params.realm;
  if (!realm) {
    throw new ImageError('unauthorized', `${registryHost} asked for a token but named no realm.`);
  }
  let url: URL;
  try {
    url = new URL(realm);
  } catch {
    throw new ImageError('unauthorized', `${registryHost} named an invalid token realm.`);
  }
  if (challenge.params.service) url.searchParams.set('service', challenge.params.service);
  url.searchParams.set('scope', challenge.params.scope ?? fallbackScope);
  const headers: Record<string, string> = { accept: 'application/json' };
  if (credentials) headers.authorization = basicAuth(credentials);

  const answer = await send(url, { method: 'GET', headers }, transport);
  const { status } = answer.response;
  if (status === 401 || status === 403) {
    answer.done();
    await answer.response.body?.cancel().catch(() => undefined);
    throw new ImageError(
      'unauthorized',
      credentials
        ? `The token service of ${registryHost} refused the credentials for ${credentials.username}.`
        : `The token service of ${registryHost} requires credentials.`,
    );
  }
  const body = await readLimited(answer, MAX_TOKEN_RESPONSE, `The token answer of ${url.host}`);
  if (status < 200 || status > 299) {
    throw new ImageError(
      'unreachable',
      `The token service of ${registryHost} answered ${status} at ${url.host}.`,
    );
  }
  let token: unknown;
  try {
    const json = JSON.parse(body.toString('utf8')) as { token?: unknown; access_token?: unknown };
    token = json.token ?? json.access_token;
  } catch {
    token = undefined;
  }
  if (typeof token !== 'string' || token.length === 0) {
    throw new ImageError('unauthorized', `The token service of ${registryHost} gave no token.`);
  }
  return token;
}
