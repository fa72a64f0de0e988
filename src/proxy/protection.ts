/**
 * The access gate of protected apps (spec 4.6, 5.10), asked by `AppProxy` before any
 * request or WebSocket upgrade reaches a machine. A request passes with, in order:
 *
 *   - `?pier_access=<signed link or token>`: a GET/HEAD is answered 303 to the same URL
 *     without the parameter, with the access cookie set; other methods and upgrades pass;
 *   - `Pier-Access-Token: <token or link>`;
 *   - the `pier_access` cookie (HttpOnly, SameSite=Lax, Secure over TLS, signed per app);
 *   - password mode: HTTP Basic (any user name, the app's password), or the form posted
 *     to `/.pier/login`, which sets the cookie.
 *
 * Whatever pier consumed is taken off the request, so the app never sees pier's
 * credentials. Otherwise: 401 (`WWW-Authenticate: Basic` and, for browsers, the form in
 * password mode). States are cached per app and dropped as soon as they change
 * (services/apps/protection-events.ts), with a 30 s backstop.
 */
import { createHash } from 'node:crypto';
import { STATUS_CODES } from 'node:http';
import type http from 'node:http';
import type { Duplex } from 'node:stream';
import type { TLSSocket } from 'node:tls';
import { ACCESS_TOKEN_HEADER } from '../contracts/protection.js';
import { verifyPassword } from '../crypto/password.js';
import { ApiError } from '../errors/api-error.js';
import { addressLimitKey } from '../host/address-key.js';
import { RateLimiter } from '../services/rate-limit.js';
import type { ServiceContext } from '../services/context.js';
import { onProtectionChange, PROTECTION_KIND } from '../services/apps/protection-events.js';
import { protectionState, type ProtectionState } from '../services/apps/protection.js';
import {
  ACCESS_PARAM,
  signCookie,
  verifySigned,
  type Grant,
} from '../services/apps/protection-signing.js';
import { LOGIN_PATH, passwordForm, WRONG_PASSWORD } from './protection-form.js';
import {
  cookieValues,
  dropCookie,
  dropHeader,
  readSmallBody,
  sameHostPath,
  sameHostUrl,
} from './protection-request.js';

/** How long a password or a visited link keeps a browser in (a link's own expiry is sooner). */
const COOKIE_TTL_S = 12 * 3600;
const CACHE_TTL_MS = 30_000;

/**
 * Wrong passwords (Basic or the form) one address, and one app from every address, may
 * send in a window; past either, password attempts answer 429 with `Retry-After` until
 * the window ends, the right password too (else a refusal would tell a guess apart).
 * Counted in this process's memory, like the API's per-address limits.
 */
export const PASSWORD_GUESSES = {
  perAddress: { limit: 10, windowMs: 10 * 60_000 },
  perApp: { limit: 100, windowMs: 10 * 60_000 },
};

/** What the gate decided: pass the request on, or answer it with this. */
export type GateVerdict =
  { pass: true } | { pass: false; status: number; headers: Record<string, string>; body: string };

/** The seam `AppProxy` asks; `ProtectionGate` is the platform's. */
export interface AccessGate {
  check(req: http.IncomingMessage, app: string, upgrade: boolean): Promise<GateVerdict>;
}

interface Cached {
  at: number;
  state: Promise<ProtectionState | undefined>;
  /** sha256 of passwords already verified against the hash (scrypt once per password). */
  goodPasswords: Set<string>;
}

/**
 * What the access cookies handed out by a password or a token (not by a link) are bound
 * to: the password's hash in password mode, the mode in signed mode. A new password, or a
 * switch of mode, so ends every such cookie issued before it; links keep theirs (a link
 * lives on across modes until it is deleted or the secret rotated).
 */
function sessionBinding(state: ProtectionState): string {
  if (state.mode !== 'password') return state.mode;
  return (
    'password:' +
    createHash('sha256')
      .update(state.passwordHash ?? '')
      .digest('base64url')
  );
}

const PASS: GateVerdict = { pass: true };

export class ProtectionGate implements AccessGate {
  private readonly cache = new Map<string, Cached>();
  /** Wrong passwords per address and per app (`PASSWORD_GUESSES`). */
  private readonly guesses = new RateLimiter();

  constructor(private readonly ctx: ServiceContext) {
    onProtectionChange(ctx, (app) => this.cache.delete(app));
    ctx.auth.onInvalidation((kind, id) => {
      if (kind === PROTECTION_KIND) this.cache.delete(id);
    });
  }

  private load(app: string): Cached {
    const hit = this.cache.get(app);
    if (hit && Date.now() - hit.at < CACHE_TTL_MS) return hit;
    const entry: Cached = {
      at: Date.now(),
      state: protectionState(this.ctx, app),
      goodPasswords: new Set(),
    };
    entry.state.catch(() => this.cache.delete(app));
    this.cache.set(app, entry);
    return entry;
  }

  async check(req: http.IncomingMessage, app: string, upgrade: boolean): Promise<GateVerdict> {
    try {
      return await this.judge(req, app, upgrade);
    } catch (err) {
      if (!(err instanceof ApiError) || err.code !== 'rate-limited') throw err;
      return tooMany(req, app, err);
    }
  }

  private async judge(
    req: http.IncomingMessage,
    app: string,
    upgrade: boolean,
  ): Promise<GateVerdict> {
    const entry = this.load(app);
    const state = await entry.state;
    if (!state) return PASS;
    const now = Math.floor(Date.now() / 1000);
    // On the app's own host whatever the target says: the 303 below goes to its path.
    const url = sameHostUrl(req.url);
    const secure = !!(req.socket as Partial<TLSSocket>).encrypted;

    if (state.mode === 'password' && url.pathname === LOGIN_PATH && !upgrade) {
      return this.login(req, app, state, entry, secure);
    }
    const param = url.searchParams.get(ACCESS_PARAM);
    if (param !== null) {
      const grant = this.valid(state, param, now, ['link', 'token']);
      if (!grant) return this.refuse(req, app, state);
      if (upgrade || (req.method !== 'GET' && req.method !== 'HEAD')) return PASS;
      url.searchParams.delete(ACCESS_PARAM);
      const exp = grant.exp === 0 ? now + COOKIE_TTL_S : Math.min(grant.exp, now + COOKIE_TTL_S);
      return redirect(url.pathname + url.search, this.cookie(state, exp, now, secure, grant));
    }
    const header = req.headers[ACCESS_TOKEN_HEADER.toLowerCase()];
    if (typeof header === 'string') {
      if (!this.valid(state, header, now, ['token', 'link'])) return this.refuse(req, app, state);
      dropHeader(req, ACCESS_TOKEN_HEADER);
      return PASS;
    }
    const cookies = cookieValues(req, ACCESS_PARAM);
    if (cookies.some((cookie) => this.valid(state, cookie, now, ['cookie']))) {
      dropCookie(req, ACCESS_PARAM);
      return PASS;
    }
    if (state.mode === 'password') {
      const password = basicPassword(req);
      if (password !== undefined && (await this.passwordOk(req, app, state, entry, password))) {
        dropHeader(req, 'authorization');
        return PASS;
      }
    }
    return this.refuse(req, app, state);
  }

  /** The grant `value` carries, if it is one of `kinds`, valid, and its link still exists. */
  private valid(
    state: ProtectionState,
    value: string,
    now: number,
    kinds: Grant['kind'][],
  ): Grant | undefined {
    const grant = verifySigned(state.secret, state.appId, value, now, sessionBinding(state));
    if (!grant || !kinds.includes(grant.kind)) return undefined;
    // Tokens are for signed mode only (a token minted then stays out of password mode).
    if (grant.kind === 'token' && state.mode !== 'signed') return undefined;
    if (grant.linkId !== undefined) {
      const linkExp = state.links.get(grant.linkId);
      if (linkExp === undefined || (linkExp !== 0 && linkExp <= now)) return undefined;
    }
    return grant;
  }

  /**
   * Whether `password` is the app's. Throws 429 `rate-limited` when the address or the app
   * has no guesses left (checked before any hashing), or when too many hashes wait.
   */
  private async passwordOk(
    req: http.IncomingMessage,
    app: string,
    state: ProtectionState,
    entry: Cached,
    password: string,
  ): Promise<boolean> {
    const { perAddress, perApp } = PASSWORD_GUESSES;
    const buckets = [
      { bucket: `address:${addressLimitKey(req.socket.remoteAddress ?? '')}`, ...perAddress },
      { bucket: `app:${app}`, ...perApp },
    ];
    for (const b of buckets) this.guesses.check(b.bucket, b.limit, b.windowMs);
    const digest = createHash('sha256').update(password).digest('hex');
    if (entry.goodPasswords.has(digest)) return true;
    const ok = await verifyPassword(password, state.passwordHash);
    if (ok) entry.goodPasswords.add(digest);
    else for (const b of buckets) this.guesses.count(b.bucket, b.windowMs);
    return ok;
  }

  private cookie(
    state: ProtectionState,
    exp: number,
    now: number,
    secure: boolean,
    grant?: Grant,
  ): string {
    const value = signCookie(
      state.secret,
      state.appId,
      new Date(exp * 1000),
      grant?.linkId,
      sessionBinding(state),
    );
    return (
      `${ACCESS_PARAM}=${value}; Path=/; Max-Age=${exp - now}; HttpOnly; SameSite=Lax` +
      (secure ? '; Secure' : '')
    );
  }

  private async login(
    req: http.IncomingMessage,
    app: string,
    state: ProtectionState,
    entry: Cached,
    secure: boolean,
  ): Promise<GateVerdict> {
    if (req.method !== 'POST') return this.refuse(req, app, state);
    const form = new URLSearchParams(await readSmallBody(req, 8192));
    const next = safeNext(form.get('next'));
    if (!(await this.passwordOk(req, app, state, entry, form.get('password') ?? ''))) {
      return htmlAnswer(401, passwordForm(app, next, WRONG_PASSWORD), app);
    }
    const now = Math.floor(Date.now() / 1000);
    return redirect(next, this.cookie(state, now + COOKIE_TTL_S, now, secure));
  }

  private refuse(req: http.IncomingMessage, app: string, state: ProtectionState): GateVerdict {
    if (state.mode === 'password' && (req.headers.accept ?? '').includes('text/html')) {
      return htmlAnswer(401, passwordForm(app, safeNext(req.url)), app);
    }
    const err = new ApiError(
      'unauthenticated',
      state.mode === 'password'
        ? 'This app is protected by a password.'
        : 'This app needs a signed link or an access token.',
    );
    const headers: Record<string, string> = {
      'content-type': 'application/json; charset=utf-8',
      'cache-control': 'no-store',
    };
    if (state.mode === 'password') headers['www-authenticate'] = challenge(app);
    return { pass: false, status: 401, headers, body: JSON.stringify(err.toBody()) };
  }
}

const challenge = (app: string) => `Basic realm="${app}", charset="UTF-8"`;

function htmlAnswer(
  status: number,
  body: string,
  app: string,
  extra: Record<string, string> = {},
): GateVerdict {
  return {
    pass: false,
    status,
    headers: {
      'content-type': 'text/html; charset=utf-8',
      'cache-control': 'no-store',
      'www-authenticate': challenge(app),
      ...extra,
    },
    body,
  };
}

/** 429 with `Retry-After`: the form again (with the wait) for browsers, else JSON. */
function tooMany(req: http.IncomingMessage, app: string, err: ApiError): GateVerdict {
  const retryAfter = String(err.retryAfter ?? 1);
  if ((req.headers.accept ?? '').includes('text/html')) {
    const next = req.url?.startsWith(LOGIN_PATH) ? '/' : safeNext(req.url);
    const notice = `Too many wrong passwords; try again in ${retryAfter} s.`;
    return htmlAnswer(429, passwordForm(app, next, notice), app, { 'retry-after': retryAfter });
  }
  return {
    pass: false,
    status: 429,
    headers: {
      'content-type': 'application/json; charset=utf-8',
      'cache-control': 'no-store',
      'retry-after': retryAfter,
    },
    body: JSON.stringify(err.toBody()),
  };
}

function redirect(location: string, setCookie: string): GateVerdict {
  return {
    pass: false,
    status: 303,
    headers: { location, 'set-cookie': setCookie, 'cache-control': 'no-store' },
    body: '',
  };
}

/** A path on the same host (never `//other`), else `/`: the form redirects there only. */
function safeNext(next: string | null | undefined): string {
  return next && /^\/(?![/\\])/.test(next) ? sameHostPath(next) : '/';
}

/** The password of an `Authorization: Basic` header (the user name is ignored). */
function basicPassword(req: http.IncomingMessage): string | undefined {
  const value = req.headers.authorization;
  if (!value || !/^basic /i.test(value)) return undefined;
  const decoded = Buffer.from(value.slice(6).trim(), 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  return colon < 0 ? undefined : decoded.slice(colon + 1);
}

/** Writes a refusing verdict on a response. */
export function answerVerdict(
  res: http.ServerResponse,
  v: Exclude<GateVerdict, { pass: true }>,
): void {
  res.writeHead(v.status, { ...v.headers, 'content-length': Buffer.byteLength(v.body) });
  res.end(v.body);
}

/** Writes a refusing verdict on the raw socket of an upgrade request, and closes it. */
export function answerVerdictRaw(socket: Duplex, v: Exclude<GateVerdict, { pass: true }>): void {
  let head = `HTTP/1.1 ${v.status} ${STATUS_CODES[v.status] ?? ''}\r\n`;
  for (const [k, value] of Object.entries(v.headers)) head += `${k}: ${value}\r\n`;
  head += `content-length: ${Buffer.byteLength(v.body)}\r\nconnection: close\r\n\r\n`;
  socket.end(head + v.body);
}
