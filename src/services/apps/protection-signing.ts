/**
 * The signed strings of app protection, all HMAC-SHA256 under the app's own secret
 * (sealed at rest in `app_protection`), so rotating the secret invalidates every one:
 *
 *   link    l1.<linkId>.<exp>.<sig>          in the `pier_access` query parameter
 *   token   t1.<exp>.<sub, base64url>.<sig> in `Pier-Access-Token` or `pier_access`
 *   cookie  c1.<exp>.<linkId or empty>.<sig> the `pier_access` cookie a visit sets
 *           (without a link, its signature also covers a session binding: signCookie)
 *
 * `exp` is in Unix seconds (0: never, links only). Each signature also covers a kind and
 * the app's id, so a string of one kind or app is never accepted as another. Compares are
 * constant-time.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

/** The query parameter (and cookie) that carries access to a protected app. */
export const ACCESS_PARAM = 'pier_access';

function sign(secret: Buffer, parts: string[]): string {
  return createHmac('sha256', secret).update(parts.join('|')).digest('base64url');
}

function sameSig(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

const seconds = (d: Date) => Math.floor(d.getTime() / 1000);

export function signLink(secret: Buffer, appId: string, linkId: string, expires?: Date): string {
  const exp = expires ? String(seconds(expires)) : '0';
  return `l1.${linkId}.${exp}.${sign(secret, ['link', appId, linkId, exp])}`;
}

export function signToken(secret: Buffer, appId: string, expires: Date, sub = ''): string {
  const exp = String(seconds(expires));
  const s = Buffer.from(sub).toString('base64url');
  return `t1.${exp}.${s}.${sign(secret, ['token', appId, exp, s])}`;
}

/**
 * `session` binds a cookie that came from no link (a password, a token) to what let it in
 * (proxy/protection.ts: the password's hash, the mode), so changing that ends it; it is
 * signed but not carried. A link's cookie is bound to its link instead.
 */
export function signCookie(
  secret: Buffer,
  appId: string,
  expires: Date,
  linkId = '',
  session = '',
): string {
  const exp = String(seconds(expires));
  return `c1.${exp}.${linkId}.${sign(secret, cookieParts(appId, exp, linkId, session))}`;
}

const cookieParts = (appId: string, exp: string, linkId: string, session: string) => [
  'cookie',
  appId,
  exp,
  linkId,
  linkId ? '' : session,
];

/** What a valid signed string grants: until when, and through which link (if any). */
export interface Grant {
  kind: 'link' | 'token' | 'cookie';
  /** Unix seconds; 0 = no expiry. */
  exp: number;
  linkId?: string;
}

/**
 * The grant `value` carries when its signature holds under `secret` for `appId` and it has
 * not expired at `nowSec`; undefined otherwise. Whether a named link still exists is the
 * caller's check (revocation).
 */
export function verifySigned(
  secret: Buffer,
  appId: string,
  value: string,
  nowSec: number,
  /** What a cookie from no link must be bound to (`signCookie`'s `session`). */
  session = '',
): Grant | undefined {
  const parts = value.split('.');
  if (parts.length !== 4) return undefined;
  const [v, a, b, sig] = parts as [string, string, string, string];
  let grant: Grant;
  let expected: string;
  if (v === 'l1') {
    grant = { kind: 'link', exp: Number(b), linkId: a };
    expected = sign(secret, ['link', appId, a, b]);
  } else if (v === 't1') {
    grant = { kind: 'token', exp: Number(a) };
    expected = sign(secret, ['token', appId, a, b]);
  } else if (v === 'c1') {
    grant = { kind: 'cookie', exp: Number(a), ...(b ? { linkId: b } : {}) };
    expected = sign(secret, cookieParts(appId, a, b, session));
  } else {
    return undefined;
  }
  if (!sameSig(sig, expected) || !Number.isInteger(grant.exp)) return undefined;
  if (grant.exp !== 0 && grant.exp <= nowSec) return undefined;
  if (grant.exp === 0 && grant.kind !== 'link') return undefined;
  return grant;
}
