/**
 * The SSH gateway (CONTRACT 8, docs/api.md "SSH gateway"): a stock OpenSSH client logs in
 * with an SSH token or a registered key and gets a shell or a command in a machine of an
 * app, or a port forward to a database attached to it or a port of one of its machines.
 * The SSH protocol is the `ssh2` package's (pure JavaScript); pier holds the TCP sockets
 * itself, so that it can count connections that have not logged in yet and cut every
 * connection at shutdown.
 */
import net from 'node:net';
import ssh2 from 'ssh2';
import { addressLimitKey } from '../host/address-key.js';
import { mayTry } from './auth.js';
import { serveClient } from './connection.js';
import type { GatewayDeps } from './deps.js';
import { SSH_LIMITS } from './limits.js';

export interface SshGatewayListener {
  /** The port it listens on (the one chosen, when asked for 0). */
  port: number;
  /** Stops listening and ends every connection, and with them their sessions. */
  close(): Promise<void>;
}

/** How long a shutdown lets connections say goodbye before it cuts their sockets. */
const CLOSE_GRACE_MS = 500;

export async function startSshGateway(
  deps: GatewayDeps,
  opts: { host: string; port: number; hostKey: string },
): Promise<SshGatewayListener> {
  const ssh = new ssh2.Server({ hostKeys: [opts.hostKey], ident: 'pier' });
  const sockets = new Set<net.Socket>();
  /** Connections not logged in yet, by `address|port`: what to call when they do. */
  const waiting = new Map<string, () => void>();
  let pending = 0;

  const tcp = net.createServer((socket) => {
    const ip = socket.remoteAddress ?? '';
    // An address past its failed logins, or a flood of connections that never log in,
    // is dropped before a byte of SSH.
    if (!mayTry(deps, addressLimitKey(ip)) || pending >= SSH_LIMITS.pendingConnections) {
      socket.destroy();
      return;
    }
    sockets.add(socket);
    pending++;
    const peer = `${ip}|${socket.remotePort}`;
    // Whether it has not logged in yet (its version line, key exchange and login included):
    // past `loginWithinMs` it is cut.
    let counted = true;
    const tooSlow = setTimeout(() => socket.destroy(), SSH_LIMITS.loginWithinMs);
    tooSlow.unref();
    const notPending = () => {
      clearTimeout(tooSlow);
      if (counted) pending--;
      counted = false;
      waiting.delete(peer);
    };
    waiting.set(peer, notPending);
    socket.once('close', () => {
      sockets.delete(socket);
      notPending();
    });
    socket.on('error', () => undefined); // the SSH connection reports and ends it
    ssh.injectSocket(socket);
  });
  // Emitted once the client's version line is read, with the socket's address and port.
  ssh.on('connection', (client, info) => {
    const notPending = waiting.get(`${info.ip}|${info.port}`) ?? (() => undefined);
    serveClient(deps, client, info.ip, addressLimitKey(info.ip), notPending);
  });

  await new Promise<void>((resolve, reject) => {
    tcp.once('error', (err: Error) =>
      reject(
        new Error(
          `the SSH gateway cannot listen on ${opts.host}:${opts.port} (PIER_SSH_LISTEN): ${err.message}`,
        ),
      ),
    );
    tcp.listen(opts.port, opts.host, () => {
      tcp.removeAllListeners('error');
      resolve();
    });
  });
  tcp.on('error', (err) => deps.log.error({ err }, 'ssh gateway: listener error'));
  const address = tcp.address();
  const port = typeof address === 'object' && address ? address.port : opts.port;
  deps.log.info({ host: opts.host, port }, 'the SSH gateway is listening');

  let closing: Promise<void> | undefined;
  return {
    port,
    close: () => (closing ??= closeAll()),
  };

  async function closeAll(): Promise<void> {
    const closed = new Promise<void>((resolve) => tcp.close(() => resolve()));
    // Sessions end with their connection (connection.ts): their processes are killed.
    for (const socket of sockets) socket.end();
    const grace = setTimeout(() => {
      for (const socket of sockets) socket.destroy();
    }, CLOSE_GRACE_MS);
    await closed;
    clearTimeout(grace);
  }
}
