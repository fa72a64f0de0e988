/**
 * Small edits of an incoming request for the access gate: pier's own credentials (the
 * access header, Basic authorization it consumed, its cookie) are taken off before the
 * request is forwarded, so an app never sees them. Forwarding reads `rawHeaders`, so
 * both views are edited.
 */
import type http from 'node:http';

/** Removes every header `name` from the request. */
export function dropHeader(req: http.IncomingMessage, name: string): void {
  const lower = name.toLowerCase();
  const raw = req.rawHeaders;
  for (let i = raw.length - 2; i >= 0; i -= 2) {
    if (raw[i]!.toLowerCase() === lower) raw.splice(i, 2);
  }
  delete req.headers[lower];
}

const pairs = (header: string) =>
  header
    .split(';')
    .map((p) => p.trim())
    .filter(Boolean);

/**
 * Every value of cookie `name` the request sends. A browser sends several when cookies of
 * one name were set for different paths or domains (one tossed by a neighbour, say), in an
 * order the setter can influence; so every one is judged, not only the first.
 */
export function cookieValues(req: http.IncomingMessage, name: string): string[] {
  const values: string[] = [];
  for (const p of pairs(req.headers.cookie ?? '')) {
    const eq = p.indexOf('=');
    if (eq > 0 && p.slice(0, eq) === name) values.push(p.slice(eq + 1));
  }
  return values;
}

/** Removes cookie `name` from every `Cookie` header (and the header, if nothing is left). */
export function dropCookie(req: http.IncomingMessage, name: string): void {
  const raw = req.rawHeaders;
  for (let i = raw.length - 2; i >= 0; i -= 2) {
    if (raw[i]!.toLowerCase() !== 'cookie') continue;
    const kept = pairs(raw[i + 1]!).filter((p) => !p.startsWith(`${name}=`));
    if (kept.length) raw[i + 1] = kept.join('; ');
    else raw.splice(i, 2);
  }
  const kept = pairs(req.headers.cookie ?? '').filter((p) => !p.startsWith(`${name}=`));
  if (kept.length) req.headers.cookie = kept.join('; ');
  else delete req.headers.cookie;
}

/** The request body as text, at most `limit` bytes (the rest is ignored). */
export function readSmallBody(req: http.IncomingMessage, limit: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      if (size < limit) chunks.push(c);
      size += c.length;
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8').slice(0, limit)));
    req.on('error', reject);
  });
}

/**
 * A request target (or a form's `next`) as a URL on the app's own host, for redirects
 * that must stay there: an absolute-form target (`http://evil.example/x`) keeps only its
 * path and query, and the path is parsed as browsers parse a `Location` (`\` is `/`, tabs
 * vanish, dot segments resolve) before its leading slashes collapse into one, so
 * `//evil.example`, `/\evil.example` or `/..//evil.example` can never name another host.
 * Anything else that is not a path becomes `/`.
 */
export function sameHostUrl(target: string | null | undefined): URL {
  const base = 'http://app.invalid';
  let url: URL;
  try {
    url = target?.startsWith('/') ? new URL(base + target) : new URL(target ?? '/');
  } catch {
    url = new URL(base + '/');
  }
  if (url.origin !== base && !/^https?:$/.test(url.protocol)) url = new URL(base + '/');
  const local = new URL(base);
  local.pathname = url.pathname.replace(/^\/+/, '/');
  local.search = url.search;
  return local;
}

/** The path and query of `sameHostUrl(target)`: a `Location` that stays on the app. */
export function sameHostPath(target: string | null | undefined): string {
  const url = sameHostUrl(target);
  return url.pathname + url.search;
}
