/**
 * Client ID Metadata Documents (the MCP 2026-07-28 revision's preferred way to name a
 * client; draft-ietf-oauth-client-id-metadata-document): a `client_id` that is an https
 * URL names a JSON document at that URL, which must list that very `client_id` and the
 * client's redirect URIs. pier fetches it for a customer's login, so through the outbound
 * guard (no loopback, private or metadata addresses), bounded in size and time, and keeps
 * it briefly per replica: a client's every login need not fetch it again.
 */
import { redirectUriProblem } from '../contracts/oauth.js';
import type { OutboundGuard } from '../host/outbound-guard.js';

const MAX_BYTES = 16 * 1024;
const TIMEOUT_MS = 5000;
const CACHE_MS = 5 * 60_000;
const CACHE_MAX = 1000;

export interface ClientDocument {
  clientId: string;
  clientName?: string;
  redirectUris: string[];
}

/** Whether a `client_id` names a metadata document rather than a registered client. */
export function isDocumentClientId(clientId: string): boolean {
  return clientId.startsWith('https://');
}

/** Why a metadata-document URL is not acceptable as a `client_id`, or undefined. */
function urlProblem(clientId: string): string | undefined {
  let url: URL;
  try {
    url = new URL(clientId);
  } catch {
    return 'is not a URL';
  }
  if (url.protocol !== 'https:') return 'must be an https URL';
  if (url.hash || url.username || url.password) return 'must not have a fragment or user info';
  if (url.pathname === '/') return 'must have a path';
  return undefined;
}

/** Reads at most `max` bytes of a body; more is a refusal, not a truncation. */
async function boundedText(res: Response, max: number): Promise<string> {
  const reader = res.body?.getReader();
  if (!reader) return '';
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > max) {
      await reader.cancel();
      throw new Error(`is larger than ${max} bytes`);
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks).toString('utf8');
}

function parseDocument(clientId: string, text: string): ClientDocument {
  let doc: Record<string, unknown>;
  try {
    doc = JSON.parse(text) as Record<string, unknown>;
  } catch {
    throw new Error('is not JSON');
  }
  if (!doc || typeof doc !== 'object') throw new Error('is not a JSON object');
  if (doc.client_id !== clientId) throw new Error('does not name this client_id');
  const uris = doc.redirect_uris;
  if (!Array.isArray(uris) || uris.length === 0 || !uris.every((u) => typeof u === 'string')) {
    throw new Error('lists no redirect_uris');
  }
  const bad = (uris as string[]).find((u) => redirectUriProblem(u));
  if (bad) throw new Error(`has a redirect URI that ${redirectUriProblem(bad)}: ${bad}`);
  if (doc.token_endpoint_auth_method !== undefined && doc.token_endpoint_auth_method !== 'none') {
    throw new Error('asks for a client secret; pier has public clients only');
  }
  const name = typeof doc.client_name === 'string' ? doc.client_name.slice(0, 120) : undefined;
  return { clientId, redirectUris: uris as string[], ...(name ? { clientName: name } : {}) };
}

export class ClientDocuments {
  private readonly cache = new Map<string, { doc: ClientDocument; until: number }>();

  constructor(
    private readonly guard: OutboundGuard,
    private readonly now: () => number = Date.now,
  ) {}

  /** The client's document; throws an Error whose message completes "The client's document …". */
  async get(clientId: string): Promise<ClientDocument> {
    const problem = urlProblem(clientId);
    if (problem) throw new Error(problem);
    const hit = this.cache.get(clientId);
    if (hit && hit.until > this.now()) return hit.doc;
    let res: Response;
    try {
      res = await this.guard.fetch(clientId, {
        headers: { accept: 'application/json' },
        signal: AbortSignal.timeout(TIMEOUT_MS),
        redirect: 'error',
      });
    } catch (err) {
      throw new Error(`could not be fetched: ${(err as Error).message}`, { cause: err });
    }
    if (res.status !== 200) {
      await res.body?.cancel().catch(() => undefined);
      throw new Error(`answered HTTP ${res.status}`);
    }
    const doc = parseDocument(clientId, await boundedText(res, MAX_BYTES));
    if (this.cache.size >= CACHE_MAX) this.cache.clear();
    this.cache.set(clientId, { doc, until: this.now() + CACHE_MS });
    return doc;
  }
}
