/**
 * OAuth clients (spec 2.3): registered dynamically (RFC 7591) or named by a metadata
 * document (client-metadata.ts). Either way a client is public: no secret, PKCE-bound.
 */
import type { RegisterClientBody, RegisteredClient } from '../contracts/oauth.js';
import { newId } from '../crypto/tokens.js';
import type { Db } from '../store/db.js';
import { type ClientDocuments, isDocumentClientId } from './client-metadata.js';
import { capUnusedClients } from './totals.js';

/** What a login needs to know of its client. */
export interface KnownClient {
  id: string;
  name?: string;
  redirectUris: string[];
  /** Named by a document at its own https URL, rather than registered by anyone here. */
  verified: boolean;
}

export async function registerClient(
  db: Db,
  body: RegisterClientBody,
  from: string,
  now: Date,
): Promise<RegisteredClient> {
  const grantTypes = body.grant_types?.length ? body.grant_types : ['authorization_code'];
  const responseTypes = body.response_types?.length ? body.response_types : ['code'];
  const row = await db
    .insertInto('oauth_clients')
    .values({
      id: newId('mcpc'),
      client_name: body.client_name ?? null,
      redirect_uris: body.redirect_uris,
      grant_types: grantTypes,
      response_types: responseTypes,
      scope: body.scope ?? null,
      registered_from: from,
      created_at: now,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
  await capUnusedClients(db);
  return {
    client_id: row.id,
    ...(row.client_name ? { client_name: row.client_name } : {}),
    redirect_uris: row.redirect_uris,
    grant_types: row.grant_types,
    response_types: row.response_types,
    token_endpoint_auth_method: 'none',
    client_id_issued_at: Math.floor(row.created_at.getTime() / 1000),
    ...(row.scope ? { scope: row.scope } : {}),
  };
}

/**
 * The client named by `clientId`, or a sentence saying why there is none. A document
 * client's sentence comes from fetching its document.
 */
export async function findClient(
  db: Db,
  documents: ClientDocuments,
  clientId: string,
): Promise<KnownClient | string> {
  if (isDocumentClientId(clientId)) {
    try {
      const doc = await documents.get(clientId);
      return { id: clientId, name: doc.clientName, redirectUris: doc.redirectUris, verified: true };
    } catch (err) {
      return `The client's metadata document ${(err as Error).message}.`;
    }
  }
  const row = await db
    .selectFrom('oauth_clients')
    .select(['id', 'client_name', 'redirect_uris'])
    .where('id', '=', clientId)
    .executeTakeFirst();
  if (!row) return 'No client is registered with this client_id.';
  return {
    id: row.id,
    ...(row.client_name ? { name: row.client_name } : {}),
    redirectUris: row.redirect_uris,
    verified: false,
  };
}

const LOOPBACK = new Set(['localhost', '127.0.0.1', '[::1]']);

/**
 * Whether `given` is one of the client's redirect URIs: exactly, or for a loopback http
 * URI on any port (RFC 8252 7.3: a desktop client listens where the system lets it).
 */
export function redirectAllowed(client: KnownClient, given: string): boolean {
  if (client.redirectUris.includes(given)) return true;
  let url: URL;
  try {
    url = new URL(given);
  } catch {
    return false;
  }
  if (url.protocol !== 'http:' || !LOOPBACK.has(url.hostname) || given.includes('#')) return false;
  return client.redirectUris.some((r) => {
    try {
      const reg = new URL(r);
      return (
        reg.protocol === 'http:' &&
        reg.hostname === url.hostname &&
        reg.pathname === url.pathname &&
        reg.search === url.search
      );
    } catch {
      return false;
    }
  });
}
