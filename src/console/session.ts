/**
 * The console's session: the console key in a cookie, the CSRF token derived from it,
 * and the same-origin checks every state-changing request passes.
 *
 * The cookie is `HttpOnly` (no script reads the key), `SameSite=Lax` (no cross-site POST
 * carries it), `Path=/console` (the API never sees it: `/v1` takes only Bearer keys), and
 * `Secure` when the browser reached us over TLS.
 *
 * The CSRF token is an HMAC of a fixed label keyed by the session's key: unguessable
 * without the cookie, different per session, the same on every replica and after a
 * restart, and nothing to store. A request is refused unless it carries it (a hidden
 * `_csrf` field or the `X-CSRF-Token` header) and, where the browser says where it comes
 * from (`Origin`, `Sec-Fetch-Site`), comes from this site.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ApiError } from '../errors/api-error.js';

export const SESSION_COOKIE = 'pier_console';
export const CSRF_FIELD = '_csrf';
export const CSRF_HEADER = 'x-csrf-token';

export function csrfTokenOf(consoleKey: string): string {
  return createHmac('sha256', consoleKey).update('pier console csrf v1').digest('base64url');
}

/** The cookies of a request (only ours matter; malformed pairs are skipped). */
export function cookiesOf(req: FastifyRequest): Map<string, string> {
  const out = new Map<string, string>();
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq < 1) continue;
    const name = part.slice(0, eq).trim();
    try {
      out.set(name, decodeURIComponent(part.slice(eq + 1).trim()));
    } catch {
      // a cookie of someone else's encoding: not ours
    }
  }
  return out;
}

export function sessionKeyOf(req: FastifyRequest): string | undefined {
  const key = cookiesOf(req).get(SESSION_COOKIE);
  return key && /^[\w.-]{10,300}$/.test(key) ? key : undefined;
}

/** Whether the browser reached the console over TLS (directly, or as the public URL says). */
function overTls(req: FastifyRequest, publicUrl: string): boolean {
  return req.protocol === 'https' || publicUrl.startsWith('https:');
}

export function setSessionCookie(
  reply: FastifyReply,
  req: FastifyRequest,
  publicUrl: string,
  key: string,
  maxAgeS: number,
): void {
  const flags = ['Path=/console', 'HttpOnly', 'SameSite=Lax', `Max-Age=${Math.max(0, maxAgeS)}`];
  if (overTls(req, publicUrl)) flags.push('Secure');
  reply.header('set-cookie', `${SESSION_COOKIE}=${encodeURIComponent(key)}; ${flags.join('; ')}`);
}

export function clearSessionCookie(reply: FastifyReply, req: FastifyRequest, publicUrl: string) {
  setSessionCookie(reply, req, publicUrl, '', 0);
}

/** The origins this console answers as: the one the browser used, and the public URL's. */
function ownOrigins(req: FastifyRequest, publicUrl: string): string[] {
  const origins = [new URL(publicUrl).origin];
  if (req.host) origins.push(`${req.protocol}://${req.host}`);
  return origins;
}

/**
 * Refuses a request a browser says came from another site. Browsers send `Origin` on
 * every POST and WebSocket; `strict` (WebSockets) also refuses a request without one.
 */
export function checkSameOrigin(req: FastifyRequest, publicUrl: string, strict = false): void {
  const site = req.headers['sec-fetch-site'];
  if (typeof site === 'string' && site !== 'same-origin' && site !== 'none') {
    throw new ApiError('csrf-failed', `Refused: the request came from another site (${site}).`);
  }
  const origin = req.headers.origin;
  if (origin === undefined) {
    if (strict) throw new ApiError('csrf-failed', 'Refused: the request names no Origin.');
    return;
  }
  if (!ownOrigins(req, publicUrl).includes(origin)) {
    throw new ApiError('csrf-failed', 'Refused: the request came from another origin.');
  }
}

/** Refuses a state-changing request without this session's CSRF token. */
export function checkCsrf(req: FastifyRequest, consoleKey: string, sent: string | undefined) {
  const header = req.headers[CSRF_HEADER];
  const given = sent ?? (typeof header === 'string' ? header : undefined);
  const expected = Buffer.from(csrfTokenOf(consoleKey));
  const got = Buffer.from(given ?? '');
  if (got.length !== expected.length || !timingSafeEqual(got, expected)) {
    throw new ApiError(
      'csrf-failed',
      'Refused: the form has no valid CSRF token. Reload the page and try again.',
    );
  }
}
