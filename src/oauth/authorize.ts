/**
 * `GET /v1/oauth/authorize` (RFC 6749 4.1.1 with OAuth 2.1's rules): checks the client and
 * its redirect URI first, and until both are trusted answers errors itself (never a
 * redirect to a URI nobody vouched for); after that, errors go back to the client on its
 * redirect URI with `error`, `state` and `iss` (RFC 9207). A valid request is stored and
 * the person is sent to the console's consent page with its id (CONTRACT 4).
 */
import { OAUTH_SCOPES } from '../contracts/oauth.js';
import { newId } from '../crypto/tokens.js';
import { ApiError, badRequest } from '../errors/api-error.js';
import type { Db } from '../store/db.js';
import type { ClientDocuments } from './client-metadata.js';
import { findClient, redirectAllowed } from './clients.js';
import { capPendingRequests } from './totals.js';
import { issuerOf, mcpResourceOf, REQUEST_TTL_S } from './urls.js';

export type AuthorizeQuery = Record<string, string | undefined>;

/** `uri` with `params` added to its query (RFC 6749 3.1.2: the URI's own query stays). */
export function withParams(uri: string, params: Record<string, string | undefined>): string {
  const url = new URL(uri);
  for (const [k, v] of Object.entries(params)) if (v !== undefined) url.searchParams.set(k, v);
  return url.toString();
}

/** The scopes pier grants of those asked for; unknown ones are dropped, `mcp` is implied. */
export function grantedScopes(scope: string | undefined): string[] {
  const asked = new Set((scope ?? '').split(' ').filter(Boolean));
  return ['mcp', ...OAUTH_SCOPES.filter((s) => s !== 'mcp' && asked.has(s))];
}

const PKCE_CHALLENGE = /^[A-Za-z0-9_-]{43}$/;

/** Where the browser goes next: the consent page, or back to the client with an error. */
export async function authorize(
  db: Db,
  documents: ClientDocuments,
  publicUrl: string,
  q: AuthorizeQuery,
  from: string,
  now: Date,
): Promise<string> {
  const clientId = q.client_id;
  if (!clientId || clientId.length > 2000) {
    throw badRequest([{ path: 'client_id', message: 'is required (at most 2000 characters)' }]);
  }
  const client = await findClient(db, documents, clientId);
  if (typeof client === 'string') throw new ApiError('bad-request', client);
  // OAuth 2.1: the redirect URI may be left out only when the client has exactly one.
  const redirectUri =
    q.redirect_uri ?? (client.redirectUris.length === 1 ? client.redirectUris[0] : undefined);
  if (!redirectUri || !redirectAllowed(client, redirectUri)) {
    throw badRequest([
      {
        path: 'redirect_uri',
        message: q.redirect_uri
          ? 'is not one of the client’s redirect URIs'
          : 'is required: the client has several',
      },
    ]);
  }

  // From here on the redirect URI is the client's: errors go back to it.
  const back = (error: string, description: string) =>
    withParams(redirectUri, {
      error,
      error_description: description,
      state: q.state,
      iss: issuerOf(publicUrl),
    });
  if (q.response_type !== 'code') {
    return back('unsupported_response_type', 'response_type must be code');
  }
  if (!q.code_challenge || !PKCE_CHALLENGE.test(q.code_challenge)) {
    return back('invalid_request', 'code_challenge is required (PKCE, S256)');
  }
  if (q.code_challenge_method !== 'S256') {
    return back('invalid_request', 'code_challenge_method must be S256');
  }
  if (q.resource !== undefined && q.resource !== mcpResourceOf(publicUrl)) {
    return back('invalid_target', `resource must be ${mcpResourceOf(publicUrl)}`);
  }
  if ((q.state?.length ?? 0) > 1000) return back('invalid_request', 'state is too long');

  // Requests a day past their end are of no use, not even to catch a reused code (a code
  // lives 60 s): each new login sweeps them, and the table stays small.
  await db
    .deleteFrom('oauth_requests')
    .where('expires_at', '<', new Date(now.getTime() - 86_400_000))
    .execute();
  const id = newId('consent');
  await db
    .insertInto('oauth_requests')
    .values({
      id,
      client_id: client.id,
      client_name: client.name ?? null,
      verified: client.verified,
      redirect_uri: redirectUri,
      code_challenge: q.code_challenge,
      state: q.state ?? null,
      scopes: grantedScopes(q.scope),
      requested_from: from,
      created_at: now,
      expires_at: new Date(now.getTime() + REQUEST_TTL_S * 1000),
    })
    .execute();
  await capPendingRequests(db);
  return `${publicUrl}/console/oauth/consent?requestId=${encodeURIComponent(id)}`;
}
