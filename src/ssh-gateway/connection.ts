/**
 * One client connection of the SSH gateway: its login, then its channels. Once logged in,
 * the connection is tied to its credential through the authenticator, as an API request
 * is to its key: deleting the SSH token or key, the token's expiry, or the suspension of
 * the organization (on any replica) ends every session of the connection, and then the
 * connection itself.
 */
import type { AuthContext, Connection } from 'ssh2';
import { AuthEnded } from '../services/authenticator.js';
import { loginKey, type SshLogin } from '../services/ssh-logins.js';
import { answerLogin } from './auth.js';
import type { GatewayDeps } from './deps.js';
import type { EndChannel, LoggedIn } from './logged-in.js';
import { serveForward } from './forward.js';
import { SSH_LIMITS } from './limits.js';
import { serveSession } from './session.js';

/**
 * Serves one connection: answers its login requests (dropping it past
 * `authRequestsPerConnection`), then its channels. `onLoggedIn` tells the server the
 * connection is no longer pending (the server cuts those pending past `loginWithinMs`).
 */
export function serveClient(
  deps: GatewayDeps,
  client: Connection,
  ip: string,
  addressKey: string,
  onLoggedIn: () => void,
): void {
  let login: SshLogin | undefined;
  let requests = 0;
  client.on('error', (err: Error) => deps.log.debug({ err, ip }, 'ssh gateway: connection error'));
  client.on('authentication', (auth: AuthContext) => {
    if (++requests > SSH_LIMITS.authRequestsPerConnection) {
      auth.reject([]);
      client.end();
      return;
    }
    answerLogin(deps, addressKey, auth, (accepted) => (login = accepted)).catch((err: unknown) => {
      deps.log.error({ err, ip }, 'ssh gateway: login failed on our side');
      auth.reject([]);
    });
  });
  client.once('ready', () => {
    onLoggedIn();
    if (!login) {
      client.end(); // cannot happen: ready follows an accepted login
      return;
    }
    loggedIn(deps, client, login, ip);
  });
}

/** How long a connection whose login ended may take to leave before it is cut. */
const LEAVE_WITHIN_MS = 1000;

function loggedIn(deps: GatewayDeps, client: Connection, login: SshLogin, ip: string): void {
  const tracked = deps.authenticator.track(loginKey(login), login.orgId, login.credential);
  const open = new Set<EndChannel>();
  const c: LoggedIn = {
    deps,
    login,
    ip,
    hold(end) {
      if (open.size >= SSH_LIMITS.channelsPerConnection) return undefined;
      open.add(end);
      return () => open.delete(end);
    },
  };
  deps.log.info(
    { credential: login.credential, id: login.id, app: login.app, ip },
    'ssh gateway: logged in',
  );
  const onAuthEnded = () => {
    const signal = tracked.signal;
    const why = signal.reason instanceof AuthEnded ? signal.reason : new AuthEnded('revoked');
    for (const end of [...open]) end(why.reason, why);
    // The client leaves once its channels are closed; a disconnect sent with them could
    // overtake their last words (OpenSSH quits on it before printing what it buffered).
    setTimeout(() => client.end(), LEAVE_WITHIN_MS).unref();
  };
  client.on('close', () => {
    tracked.signal.removeEventListener('abort', onAuthEnded);
    tracked.done();
    for (const end of [...open]) end('client-closed');
  });
  if (tracked.signal.aborted) return onAuthEnded();
  tracked.signal.addEventListener('abort', onAuthEnded, { once: true });
  client.on('session', (accept, reject) => serveSession(c, accept, reject));
  client.on('tcpip', (accept, reject, info) => serveForward(c, accept, reject, info));
}
