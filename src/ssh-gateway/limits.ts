/** Bounds of the SSH gateway; a test may lower them (the object is read at each use). */
export const SSH_LIMITS = {
  /**
   * Failed logins per source address a minute (a wrong token, a key the app's
   * organization does not have, a bad signature, a password): past it, connections from
   * the address are dropped before they may try again, until the window ends.
   */
  failuresPerMinute: 60,
  /** Login requests one connection may make before it is dropped (OpenSSH allows 6 tries). */
  authRequestsPerConnection: 20,
  /** A connection not logged in by then is dropped. */
  loginWithinMs: 30_000,
  /** Connections at once that have not logged in yet (a flood of idle handshakes stops here). */
  pendingConnections: 256,
  /** Channels (shells, commands, forwards) one connection may hold open at once. */
  channelsPerConnection: 10,
};
