/**
 * Who logs in at the SSH gateway (CONTRACT 8), and which machine a shell of theirs opens
 * on. Two ways in:
 *
 * - an SSH token (`POST /v1/ssh/tokens`) as the user name: it names its app (and maybe a
 *   machine) and acts for its organization until it expires or is deleted;
 * - a person's key registered through `/v1/ssh-keys`, with the user name `<app>` or
 *   `<app>.<machine id>`: the key acts for its organization (as its person, when it has
 *   one). The signature itself is the gateway's to check; this finds the key.
 *
 * An app or machine that is not the organization's is answered exactly like a missing one.
 */
import { ApiError } from '../errors/api-error.js';
import { sha256 } from '../crypto/tokens.js';
import type { AuthenticatedKey, Credential } from './authenticator.js';
import type { ServiceContext } from './context.js';
import { guestMachine } from './machines/guest-access.js';
import { configOf, machinesQuery, type MachineRow } from './machines/records.js';

/** A login the gateway accepted. */
export interface SshLogin {
  credential: Extract<Credential, 'ssh-token' | 'ssh-key'>;
  /** The SSH token's or SSH key's id: the key id of its sessions' audit rows. */
  id: string;
  orgId: string;
  /** The key's person, if it has one. */
  userId: string | null;
  expiresAt: Date | null;
  app: string;
  /** The machine the login names; absent: the app's first machine that takes a shell. */
  machine?: string;
  /**
   * A login as `git` (CONTRACT 8's push entrance): the key's fingerprint, by which the
   * app's organization is found once the push names the app. `app` is then empty.
   */
  git?: { fingerprint: string };
}

/** The user name of `git push ssh://git@<gateway>/<app>.git`. */
export const GIT_USER = 'git';

/** SSH tokens are `piers_` and 43 base62 characters (crypto/tokens.ts mintSecret). */
const TOKEN_SHAPE = /^piers_[0-9A-Za-z]{43}$/;

/** Whether a user name is shaped like an SSH token (else it names an app). */
export function looksLikeToken(username: string): boolean {
  return TOKEN_SHAPE.test(username);
}

/** The live SSH token `token` names, or undefined (unknown, deleted or expired). */
export async function tokenLogin(
  ctx: ServiceContext,
  token: string,
): Promise<SshLogin | undefined> {
  if (!looksLikeToken(token)) return undefined;
  const row = await ctx.db
    .selectFrom('ssh_tokens')
    .select(['id', 'org_id', 'app_name', 'machine', 'expires_at'])
    .where('hash', '=', sha256(token))
    .executeTakeFirst();
  if (!row || row.expires_at.getTime() <= ctx.clock().getTime()) return undefined;
  return {
    credential: 'ssh-token',
    id: row.id,
    orgId: row.org_id,
    userId: null,
    expiresAt: row.expires_at,
    app: row.app_name,
    ...(row.machine ? { machine: row.machine } : {}),
  };
}

/** `<app>` or `<app>.<machine id>` (app names hold no dot). */
export function parseAppUser(username: string): { app: string; machine?: string } {
  const dot = username.indexOf('.');
  if (dot < 0) return { app: username };
  return { app: username.slice(0, dot), machine: username.slice(dot + 1) };
}

/**
 * The registered key with this fingerprint in the organization of the app `username`
 * names, and the login it would give; undefined when there is none (no such app, the
 * key is not the app's organization's, or the named machine is not the app's).
 */
export async function keyLogin(
  ctx: ServiceContext,
  username: string,
  fingerprint: string,
): Promise<{ login: SshLogin; publicKey: string } | undefined> {
  const { app, machine } = parseAppUser(username);
  if (app === '' || machine === '') return undefined;
  const row = await ctx.db
    .selectFrom('apps')
    .innerJoin('ssh_keys', 'ssh_keys.org_id', 'apps.org_id')
    .select(['apps.id as app_id', 'ssh_keys.id', 'ssh_keys.org_id', 'ssh_keys.user_id'])
    .select('ssh_keys.public_key')
    .where('apps.name', '=', app)
    .where('ssh_keys.fingerprint', '=', fingerprint)
    .executeTakeFirst();
  if (!row) return undefined;
  if (machine !== undefined) {
    const found = await ctx.db
      .selectFrom('machines')
      .select('id')
      .where('id', '=', machine)
      .where('app_id', '=', row.app_id)
      .where('observed_state', '<>', 'deleted')
      .executeTakeFirst();
    if (!found) return undefined;
  }
  return {
    publicKey: row.public_key,
    login: {
      credential: 'ssh-key',
      id: row.id,
      orgId: row.org_id,
      userId: row.user_id,
      expiresAt: null,
      app,
      ...(machine !== undefined ? { machine } : {}),
    },
  };
}

/**
 * The registered key with this fingerprint a `git` login stands on until its push names an
 * app (the oldest, when several organizations registered it): undefined when no
 * organization has it. The push is then judged by the key of the app's organization.
 */
export async function gitKeyLogin(
  ctx: ServiceContext,
  fingerprint: string,
): Promise<{ login: SshLogin; publicKey: string } | undefined> {
  const row = await ctx.db
    .selectFrom('ssh_keys')
    .select(['id', 'org_id', 'user_id', 'public_key'])
    .where('fingerprint', '=', fingerprint)
    .orderBy('created_at')
    .executeTakeFirst();
  if (!row) return undefined;
  return {
    publicKey: row.public_key,
    login: {
      credential: 'ssh-key',
      id: row.id,
      orgId: row.org_id,
      userId: row.user_id,
      expiresAt: null,
      app: '',
      git: { fingerprint },
    },
  };
}

/** The login as the authenticator tracks it: a key of its organization, no scopes. */
export function loginKey(login: SshLogin): AuthenticatedKey {
  return {
    id: login.id,
    orgId: login.orgId,
    userId: login.userId,
    role: null,
    scopes: null,
    expiresAt: login.expiresAt,
    agent: null,
    console: false,
    audience: null,
  };
}

/** Machine states in the order a shell prefers them: a running one, then a sleeping one. */
const PREFERRED = ['running', 'suspended'];

/**
 * The machine a shell of `login` opens on: the one it names (404 `machine-not-found`
 * unless it is a machine of the login's app), else the app's first running machine, or
 * a suspended one (woken by the session), or its first at all (whose state the session
 * then reports). Console and job machines take no shell and are passed over.
 */
export async function shellMachine(ctx: ServiceContext, login: SshLogin): Promise<string> {
  if (login.machine !== undefined) {
    const row = await guestMachine(ctx, login.orgId, login.machine);
    if (row.app_name !== login.app) {
      throw new ApiError(
        'machine-not-found',
        `No machine '${login.machine}' in this organization.`,
      );
    }
    return row.id;
  }
  const rows = await machinesQuery(ctx.db)
    .where('machines.org_id', '=', login.orgId)
    .where('apps.name', '=', login.app)
    .where('machines.observed_state', '<>', 'deleted')
    .orderBy('machines.created_at')
    .execute();
  const shells = rows.filter((r: MachineRow) => !configOf(r).console && !configOf(r).command);
  const rank = (r: MachineRow) => {
    const i = PREFERRED.indexOf(r.observed_state);
    return i < 0 ? PREFERRED.length : i;
  };
  const best = shells.sort((a, b) => rank(a) - rank(b))[0];
  if (!best) {
    throw new ApiError(
      'machine-not-found',
      `App '${login.app}' has no machine that takes a shell; create one first.`,
    );
  }
  return best.id;
}
