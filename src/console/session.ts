/**
 * The console's session: the console key in a cookie, the CSRF token derived from it,
 * and the same-origin checks every state-changing request passes.
 *
 * The cookie is `HttpOnly` (no script reads the key) and `SameSite=Lax` (no cross-site
 * POST carries it); `/v1` takes only Bearer keys, so it is worth nothing to the API.
 * Apps live on names under the console's own host, the same site, so an app could try to
 * plant a cookie of this name for the console (cookie tossing, docs/architecture.md):
 *
 *   - over TLS it is `__Host-pier_console` (`Secure`, `Path=/`, no `Domain`): browsers
 *     accept a cookie of that name only from the console's host itself, so no app can set
 *     one, and the console reads no other name;
 *   - over plain HTTP it is `pier_console` with `Path=/console`; the proxy takes `Domain`
 *     off apps' `Set-Cookie` headers, and a request carrying more than one cookie of the
 *     name (one written by an app's script) has no session rather than a guessed one.
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
/** The session cookie's name over TLS: see above. */
export const TLS_SESSION_COOKIE = '__Host-pier_console';
export const CSRF_FIELD = '_csrf';
export const CSRF_HEADER = 'x-csrf-token';

export function csrfTokenOf(consoleKey: string): string {
  return createHmac('sha256', consoleKey).update('pier console csrf v1').digest('base64url');
}

/** Every value of cookie `name` in a request (malformed pairs are skipped). */
export function cookieValuesOf(req: FastifyRequest, name: string): string[] {
  const out: string[] = [];
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq < 1 || part.slice(0, eq).trim() !== name) continue;
    try {
      out.push(decodeURIComponent(part.slice(eq + 1).trim()));
    } catch {
      // a cookie of someone else's encoding: not ours
    }
  }
  return out;
}

/** Whether the browser reached the console over TLS (directly, or as the public URL says). */
function overTls(req: FastifyRequest, publicUrl: string): boolean {
  return req.protocol === 'https' || publicUrl.startsWith('https:');
}

const cookieName = (req: FastifyRequest, publicUrl: string) =>
  overTls(req, publicUrl) ? TLS_SESSION_COOKIE : SESSION_COOKIE;

/**
 * The console key of the request's session cookie. Two cookies of the name mean someone
 * else wrote one, and which is ours cannot be told (the writer chooses the order by its
 * path): no session then, rather than the wrong one.
 */
export function sessionKeyOf(req: FastifyRequest, publicUrl: string): string | undefined {
  const keys = cookieValuesOf(req, cookieName(req, publicUrl));
  const key = keys.length === 1 ? keys[0] : undefined;
  return key && /^[\w.-]{10,300}$/.test(key) ? key : undefined;
}

export function setSessionCookie(
  reply: FastifyReply,
  req: FastifyRequest,
  publicUrl: string,
  key: string,
  maxAgeS: number,
): void {
  const tls = overTls(req, publicUrl);
  // `__Host-` demands Path=/ and Secure (and no Domain), or the browser drops the cookie.
  const flags = [tls ? 'Path=/' : 'Path=/console', 'HttpOnly', 'SameSite=Lax'];
  flags.push(`Max-Age=${Math.max(0, maxAgeS)}`);
  if (tls) flags.push('Secure');
  const name = cookieName(req, publicUrl);
  reply.header('set-cookie', `${name}=${encodeURIComponent(key)}; ${flags.join('; ')}`);
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
