/**
 * Logins at the SSH gateway (CONTRACT 8). The user name says which way in:
 *
 * - an SSH token (`piers_…`, as the command `POST /v1/ssh/tokens` answers): the token is
 *   the credential, so whatever method the client tries first (OpenSSH's `none`, or a
 *   password or key prompt) is accepted when it names a live token; a wrong one is refused
 *   with no method left to try;
 * - `<app>` or `<app>.<machine id>`: publickey only, with a key registered in the app's
 *   organization, and its signature checked over this connection's session id;
 * - `git` (`git push ssh://git@<gateway>/<app>.git`): publickey, with a key registered
 *   in any organization; the push names the app, and must be of the key's (git.ts).
 *
 * Every failed try counts against the source address (SSH_LIMITS.failuresPerMinute).
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { AuthContext, PublicKeyAuthContext } from 'ssh2';
import ssh2 from 'ssh2';
import {
  GIT_USER,
  gitKeyLogin,
  keyLogin,
  looksLikeToken,
  tokenLogin,
  type SshLogin,
} from '../services/ssh-logins.js';
import type { GatewayDeps } from './deps.js';
import { SSH_LIMITS } from './limits.js';

/** The rate limiter's bucket of an address's failed logins. */
export const failureBucket = (addressKey: string) => `ssh-login:${addressKey}`;

/** Whether the address may try again now (its failures are under the limit). */
export function mayTry(deps: GatewayDeps, addressKey: string): boolean {
  try {
    deps.rateLimiter.check(failureBucket(addressKey), SSH_LIMITS.failuresPerMinute, 60_000);
    return true;
  } catch {
    return false;
  }
}

/**
 * Answers one login request. A complete login is handed to `loggedIn` just before it is
 * accepted (the connection is ready, and opens channels, at once).
 */
export async function answerLogin(
  deps: GatewayDeps,
  addressKey: string,
  auth: AuthContext,
  loggedIn: (login: SshLogin) => void,
): Promise<void> {
  const fail = (methodsLeft: ('publickey' | 'none')[]) => {
    deps.rateLimiter.count(failureBucket(addressKey), 60_000);
    auth.reject(methodsLeft);
  };
  if (!mayTry(deps, addressKey)) return auth.reject([]);
  if (looksLikeToken(auth.username)) {
    const login = await tokenLogin(deps.ctx, auth.username);
    if (!login) return fail([]);
    // A key offered only to be looked at is answered "go on" first, as publickey asks.
    if (auth.method === 'publickey' && !auth.signature) return auth.accept();
    loggedIn(login);
    return auth.accept();
  }
  if (auth.method === 'none') {
    // OpenSSH asks first which methods there are: not a failed try.
    return auth.reject(['publickey']);
  }
  if (auth.method !== 'publickey') return fail(['publickey']);
  return answerKey(deps, auth, fail, loggedIn);
}

async function answerKey(
  deps: GatewayDeps,
  auth: PublicKeyAuthContext,
  fail: (methodsLeft: 'publickey'[]) => void,
  loggedIn: (login: SshLogin) => void,
): Promise<void> {
  const fingerprint =
    'SHA256:' + createHash('sha256').update(auth.key.data).digest('base64').replace(/=+$/, '');
  const found =
    auth.username === GIT_USER
      ? await gitKeyLogin(deps.ctx, fingerprint)
      : await keyLogin(deps.ctx, auth.username, fingerprint);
  if (!found) return fail(['publickey']);
  const stored = ssh2.utils.parseKey(found.publicKey);
  if (stored instanceof Error) return fail(['publickey']);
  const blob = stored.getPublicSSH();
  if (blob.length !== auth.key.data.length || !timingSafeEqual(blob, auth.key.data)) {
    return fail(['publickey']);
  }
  // The key would do: the client signs next.
  if (!auth.signature || !auth.blob) return auth.accept();
  if (stored.verify(auth.blob, auth.signature, auth.hashAlgo) !== true) return fail(['publickey']);
  loggedIn(found.login);
  auth.accept();
}
