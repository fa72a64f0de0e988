/**
 * App protection (spec 4.6, 5.10): public by default; `password` (the proxy asks for one
 * password, HTTP Basic or a form); `signed` (signed links and short-lived access
 * tokens). Links work in password mode too; tokens only in signed mode. The app's HMAC
 * secret is sealed at rest; the password is an scrypt hash. Enforcement is the proxy's
 * (proxy/protection.ts), which reads `protectionState`.
 */
import { randomBytes } from 'node:crypto';
import {
  ACCESS_TOKEN_HEADER,
  type AccessToken,
  type CreatedLink,
  type CreateLinkBody,
  type CreateTokenBody,
  type Protection,
  type ProtectionLink,
  type SetProtectionBody,
} from '../../contracts/protection.js';
import { hashPassword } from '../../crypto/password.js';
import { newId, randomBase62 } from '../../crypto/tokens.js';
import { ApiError, badRequest, notFound } from '../../errors/api-error.js';
import type { Executor } from '../../store/db.js';
import type { ServiceContext } from '../context.js';
import { announceProtectionWithin, changeProtection } from './protection-events.js';
import { ACCESS_PARAM, signLink, signToken } from './protection-signing.js';
import { findApp, toApp, type AppRow } from './records.js';

const DEFAULT_TOKEN_TTL_S = 3600;

type ProtectionRow = {
  mode: 'password' | 'signed';
  password_hash: string | null;
  secret_nonce: Buffer;
  secret_ciphertext: Buffer;
  updated_at: Date;
};

const secretBinding = (appId: string) => `protection:${appId}`;

async function protectionRow(ex: Executor, appId: string): Promise<ProtectionRow | undefined> {
  return ex
    .selectFrom('app_protection')
    .select(['mode', 'password_hash', 'secret_nonce', 'secret_ciphertext', 'updated_at'])
    .where('app_id', '=', appId)
    .executeTakeFirst();
}

async function linkRows(ex: Executor, appId: string) {
  return ex
    .selectFrom('protection_links')
    .select(['id', 'label', 'expires_at', 'created_at'])
    .where('app_id', '=', appId)
    .orderBy('created_at')
    .execute();
}

function toLink(r: {
  id: string;
  label: string;
  expires_at: Date | null;
  created_at: Date;
}): ProtectionLink {
  return {
    id: r.id,
    label: r.label,
    ...(r.expires_at ? { expiresAt: r.expires_at.toISOString() } : {}),
    createdAt: r.created_at.toISOString(),
  };
}

async function answer(ex: Executor, app: AppRow, password?: string): Promise<Protection> {
  const row = await protectionRow(ex, app.id);
  return {
    appName: app.name,
    mode: row?.mode ?? 'public',
    passwordSet: !!row?.password_hash,
    ...(password ? { password } : {}),
    header: ACCESS_TOKEN_HEADER,
    links: row ? (await linkRows(ex, app.id)).map(toLink) : [],
    ...(row ? { updatedAt: row.updated_at.toISOString() } : {}),
  };
}

/** A password people can type and pier can show once: 24 base62 characters (≈143 bits). */
const generatePassword = () => randomBase62(24);

function sealSecret(ctx: ServiceContext, appId: string) {
  const sealed = ctx.box.seal(randomBytes(32).toString('base64'), secretBinding(appId));
  return { secret_nonce: sealed.nonce, secret_ciphertext: sealed.ciphertext };
}

export async function getProtection(
  ctx: ServiceContext,
  orgId: string,
  appName: string,
): Promise<Protection> {
  return answer(ctx.db, await findApp(ctx.db, orgId, appName));
}

/**
 * Sets the mode. `public` removes protection, its links and its secret. Entering
 * password mode (or setting it again) without a password generates one, answered once.
 * Changing between password and signed keeps the secret (links stay valid).
 */
export async function setProtection(
  ctx: ServiceContext,
  orgId: string,
  appName: string,
  body: SetProtectionBody,
): Promise<Protection> {
  if (body.password !== undefined && body.mode !== 'password') {
    throw badRequest([{ path: 'password', message: 'only with mode "password"' }]);
  }
  const generated = body.mode === 'password' && !body.password ? generatePassword() : undefined;
  const password = body.password ?? generated;
  const hash = password ? await hashPassword(password) : null;
  return changeProtection(ctx, appName, async (tx) => {
    const app = await findApp(tx, orgId, appName, { lock: true });
    if (body.mode === 'public') {
      await tx.deleteFrom('protection_links').where('app_id', '=', app.id).execute();
      await tx.deleteFrom('app_protection').where('app_id', '=', app.id).execute();
      return answer(tx, app);
    }
    const now = ctx.clock();
    const mode = body.mode;
    await tx
      .insertInto('app_protection')
      .values({
        app_id: app.id,
        mode,
        password_hash: hash,
        ...sealSecret(ctx, app.id),
        updated_at: now,
      })
      .onConflict((oc) =>
        oc.column('app_id').doUpdateSet({ mode, password_hash: hash, updated_at: now }),
      )
      .execute();
    return answer(tx, app, generated);
  });
}

/**
 * Gives app `to` the protection of app `from` inside the caller's transaction (a preview
 * inherits its app's): the same mode and password. Its signing secret is its own, so the
 * links and tokens of `from` do not open `to`; none are copied.
 */
export async function copyProtection(
  tx: Executor,
  ctx: ServiceContext,
  from: AppRow,
  to: AppRow,
): Promise<void> {
  const row = await protectionRow(tx, from.id);
  if (!row) return;
  await tx
    .insertInto('app_protection')
    .values({
      app_id: to.id,
      mode: row.mode,
      password_hash: row.password_hash,
      ...sealSecret(ctx, to.id),
      updated_at: ctx.clock(),
    })
    .execute();
  await announceProtectionWithin(tx, to.name);
}

async function protectedApp(
  tx: Executor,
  orgId: string,
  appName: string,
): Promise<{ app: AppRow; row: ProtectionRow }> {
  const app = await findApp(tx, orgId, appName, { lock: true });
  const row = await protectionRow(tx, app.id);
  if (!row) throw new ApiError('not-protected');
  return { app, row };
}

/**
 * A new signing secret (every link, token and access cookie signed with the old one is
 * refused from now on; the links are deleted), and in password mode a new generated
 * password, answered once.
 */
export async function rotateProtection(
  ctx: ServiceContext,
  orgId: string,
  appName: string,
): Promise<Protection> {
  const password = generatePassword();
  const hash = await hashPassword(password);
  return changeProtection(ctx, appName, async (tx) => {
    const { app, row } = await protectedApp(tx, orgId, appName);
    const isPassword = row.mode === 'password';
    await tx.deleteFrom('protection_links').where('app_id', '=', app.id).execute();
    await tx
      .updateTable('app_protection')
      .set({
        ...sealSecret(ctx, app.id),
        ...(isPassword ? { password_hash: hash } : {}),
        updated_at: ctx.clock(),
      })
      .where('app_id', '=', app.id)
      .execute();
    return answer(tx, app, isPassword ? password : undefined);
  });
}

function secretOf(ctx: ServiceContext, appId: string, row: ProtectionRow): Buffer {
  const b64 = ctx.box.open(
    { nonce: row.secret_nonce, ciphertext: row.secret_ciphertext },
    secretBinding(appId),
  );
  return Buffer.from(b64, 'base64');
}

/**
 * The app's address with `path` and the access parameter set to `value`. Built as text:
 * WHATWG URLs refuse hosts that end in a number (`app.127.0.0.1`, a test's public host).
 */
function accessUrl(ctx: ServiceContext, app: AppRow, value: string, path = '/'): string {
  const [pathname = '/', query] = path.split(/\?(.*)/s, 2);
  const params = new URLSearchParams(query);
  params.set(ACCESS_PARAM, value);
  return `${toApp(ctx, app).defaultAddress}${pathname}?${params.toString()}`;
}

export async function createLink(
  ctx: ServiceContext,
  orgId: string,
  appName: string,
  body: CreateLinkBody,
): Promise<CreatedLink> {
  const expires = body.expiresAt ? new Date(body.expiresAt) : undefined;
  if (expires && expires <= ctx.clock()) {
    throw badRequest([{ path: 'expiresAt', message: 'must be in the future' }]);
  }
  return changeProtection(ctx, appName, async (tx) => {
    const { app, row } = await protectedApp(tx, orgId, appName);
    const id = newId('lnk');
    const inserted = await tx
      .insertInto('protection_links')
      .values({ id, app_id: app.id, label: body.label, expires_at: expires ?? null })
      .returning(['id', 'label', 'expires_at', 'created_at'])
      .executeTakeFirstOrThrow();
    const value = signLink(secretOf(ctx, app.id, row), app.id, id, expires);
    return { ...toLink(inserted), url: accessUrl(ctx, app, value) };
  });
}

export async function deleteLink(
  ctx: ServiceContext,
  orgId: string,
  appName: string,
  linkId: string,
): Promise<void> {
  await changeProtection(ctx, appName, async (tx) => {
    const app = await findApp(tx, orgId, appName, { lock: true });
    const gone = await tx
      .deleteFrom('protection_links')
      .where('app_id', '=', app.id)
      .where('id', '=', linkId)
      .executeTakeFirst();
    if (!gone.numDeletedRows) throw notFound(`Link '${linkId}'`);
  });
}

/** `next` is a path on the app (never another site: no open redirect). */
function checkNext(next: string | undefined): void {
  if (next === undefined) return;
  if (!next.startsWith('/') || next.startsWith('//') || next.includes('\\')) {
    throw badRequest([{ path: 'next', message: 'a path on the app, starting with one /' }]);
  }
}

export async function createToken(
  ctx: ServiceContext,
  orgId: string,
  appName: string,
  body: CreateTokenBody,
): Promise<AccessToken> {
  checkNext(body.next);
  const app = await findApp(ctx.db, orgId, appName);
  const row = await protectionRow(ctx.db, app.id);
  if (row?.mode !== 'signed') throw new ApiError('not-signed');
  const expires = new Date(ctx.clock().getTime() + (body.ttlSeconds ?? DEFAULT_TOKEN_TTL_S) * 1000);
  const token = signToken(secretOf(ctx, app.id, row), app.id, expires, body.sub);
  return {
    token,
    expiresAt: expires.toISOString(),
    url: accessUrl(ctx, app, token, body.next),
    header: ACCESS_TOKEN_HEADER,
  };
}

/** What the proxy needs to judge a request to a protected app. */
export interface ProtectionState {
  appId: string;
  mode: 'password' | 'signed';
  secret: Buffer;
  passwordHash: string | null;
  /** Live links: id → expiry in Unix seconds (0: none). */
  links: Map<string, number>;
}

/** The app's protection as the proxy judges it; undefined when public (or no such app). */
export async function protectionState(
  ctx: ServiceContext,
  appName: string,
): Promise<ProtectionState | undefined> {
  const app = await ctx.db
    .selectFrom('apps')
    .select('id')
    .where('name', '=', appName)
    .executeTakeFirst();
  if (!app) return undefined;
  const row = await protectionRow(ctx.db, app.id);
  if (!row) return undefined;
  const links = new Map<string, number>();
  for (const l of await linkRows(ctx.db, app.id)) {
    links.set(l.id, l.expires_at ? Math.floor(l.expires_at.getTime() / 1000) : 0);
  }
  return {
    appId: app.id,
    mode: row.mode,
    secret: secretOf(ctx, app.id, row),
    passwordHash: row.password_hash,
    links,
  };
}
