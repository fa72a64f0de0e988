/** A logged-in connection of the SSH gateway, as its channels (sessions, forwards) see it. */
import type { AuthEnded } from '../services/authenticator.js';
import type { SshLogin } from '../services/ssh-logins.js';
import type { GatewayDeps } from './deps.js';

/** Ends an open channel: `why` when its login may no longer, else the connection went. */
export type EndChannel = (reason: string, why?: AuthEnded) => void;

/** A logged-in connection, as its channels see it. */
export interface LoggedIn {
  deps: GatewayDeps;
  login: SshLogin;
  /** The client's address, as the sessions' audit rows record it. */
  ip: string;
  /**
   * Registers an open channel; undefined when the connection holds as many as allowed.
   * The answer gives the place back (idempotent).
   */
  hold(end: EndChannel): (() => void) | undefined;
}
