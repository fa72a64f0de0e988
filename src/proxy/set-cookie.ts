/**
 * Keeping an app's cookies on the app's own host (cookie tossing). Default addresses
 * `<app>.<public host>` share a site with the console and with every other app, so a
 * `Set-Cookie` with `Domain=<public host>` from one app would reach the console (signing
 * its visitor into the app owner's organization, or out of their own) and every other
 * app (their `pier_access` cookies). The proxy therefore rewrites the `Set-Cookie`
 * headers of every answer, upgrades included: a `Domain` attribute that would let the
 * cookie reach another host pier serves is removed, which leaves a host-only cookie of
 * the app's own host (what the app gets when it leaves `Domain` out). Cookies without
 * `Domain` are host-only already and pass as sent.
 *
 * Scripts of an app's pages can still write `document.cookie` with a `Domain`; no proxy
 * sees that. The console's `__Host-` cookie over HTTPS and apps on a domain of their own
 * (`PIER_APPS_DOMAIN`) are the answer there (docs/architecture.md, "Cookies").
 */
import { domainToASCII } from 'node:url';

/** Whose cookies an answer may set: the request's host, and the hosts no app may reach. */
export interface CookieScope {
  /** The host the browser asked (lower case, no port, no trailing dot). */
  host: string;
  /** The public host and the apps' domain: neither they nor names under them are an app's. */
  guarded: readonly string[];
}

/** A `Domain` attribute's value as a browser reads it: one leading dot dropped, IDNA applied. */
function canonicalDomain(value: string): string {
  // domainToASCII parses as a URL host does (percent-decoding, IDNA mapping such as
  // full-width letters), so a spelling a browser would fold onto a guarded name is caught.
  const dots = (s: string) => s.replace(/^\.+|\.+$/g, '');
  return dots(domainToASCII(dots(value.trim())).toLowerCase());
}

const under = (name: string, parent: string) => name === parent || name.endsWith('.' + parent);

/** Whether `Domain=<domain>` keeps the cookie among the names of the app that set it. */
function domainAllowed(domain: string, scope: CookieScope): boolean {
  if (domain === scope.host) return true;
  if (!domain) return false;
  // A default address may name only itself: every sibling is another app.
  if (scope.guarded.some((g) => under(scope.host, g))) return false;
  // A custom domain may widen to its parent (`shop.com` for `www.shop.com`) unless that
  // covers pier's own names or reaches under them.
  return !scope.guarded.some((g) => under(g, domain) || under(domain, g));
}

/**
 * The `Set-Cookie` value as it may reach the browser: unchanged, or without its `Domain`
 * attributes (all of them: browsers differ on which one counts) when one is not allowed.
 * Attribute names are matched as browsers match them, ignoring case and spaces.
 */
export function confineSetCookie(value: string, scope: CookieScope): string {
  const parts = value.split(';');
  const isDomain = (part: string) => {
    const eq = part.indexOf('=');
    return (eq < 0 ? part : part.slice(0, eq)).trim().toLowerCase() === 'domain';
  };
  // The first part is the cookie's name and value, never an attribute.
  const domains = parts.slice(1).filter(isDomain);
  const allowed = domains.every((d) =>
    domainAllowed(canonicalDomain(d.slice(d.indexOf('=') + 1)), scope),
  );
  if (allowed) return value;
  return [parts[0]!, ...parts.slice(1).filter((p) => !isDomain(p))].join(';');
}

/** Raw headers (`[name, value, …]`) with every `Set-Cookie` confined to `scope`. */
export function confineSetCookies(raw: string[], scope: CookieScope): string[] {
  const out = raw.slice();
  for (let i = 0; i < out.length; i += 2) {
    if (out[i]!.toLowerCase() === 'set-cookie') out[i + 1] = confineSetCookie(out[i + 1]!, scope);
  }
  return out;
}

/**
 * A raw response head (status line and header lines, as a machine wrote it on an upgraded
 * connection) with every `Set-Cookie` confined to `scope`. Folded lines are unfolded
 * first, as browsers do, so a `Domain` cannot hide on a continuation line.
 */
export function confineHeadCookies(head: string, scope: CookieScope): string {
  const lines: string[] = [];
  for (const line of head.split('\n')) {
    if (/^[ \t]/.test(line) && lines.length > 1 && line.trim()) {
      lines[lines.length - 1] = lines.at(-1)!.replace(/\r$/, '') + ' ' + line.trimStart();
    } else lines.push(line);
  }
  return lines
    .map((line) => {
      const colon = line.indexOf(':');
      if (colon < 0 || line.slice(0, colon).trim().toLowerCase() !== 'set-cookie') return line;
      const cr = line.endsWith('\r') ? '\r' : '';
      const value = line.slice(colon + 1, line.length - cr.length).trim();
      return `${line.slice(0, colon)}: ${confineSetCookie(value, scope)}${cr}`;
    })
    .join('\n');
}

/**
 * Where the first response head in `bytes` ends (just past its blank line), or -1. Like
 * browsers, a bare LF ends a line too.
 */
export function headEnd(bytes: Buffer): number {
  const lf = bytes.indexOf('\n\n');
  const crlf = bytes.indexOf('\n\r\n');
  const ends = [lf < 0 ? -1 : lf + 2, crlf < 0 ? -1 : crlf + 3].filter((e) => e >= 0);
  return ends.length ? Math.min(...ends) : -1;
}
