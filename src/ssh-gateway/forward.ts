/**
 * `direct-tcpip` channels (`ssh -L <local port>:<database name or machine id>:<port>`):
 * admitted by services/ssh-forwards.ts, then spliced to a TCP connection with the
 * channel's own flow control (pipe pauses the side whose peer is slow). A forward the
 * gateway refuses is a failed channel open, which ssh reports as "open failed" (the
 * protocol carries no reason the client shows for this; the gateway logs it). A forward
 * with no byte either way for the database tunnel's idle time is closed.
 */
import net from 'node:net';
import type { AcceptConnection, RejectConnection, ServerChannel, TcpipRequestInfo } from 'ssh2';
import { ApiError } from '../errors/api-error.js';
import type { AuthEnded } from '../services/authenticator.js';
import { TUNNEL_LIMITS } from '../services/databases/tunnels.js';
import { admitForward, type ForwardTarget } from '../services/ssh-forwards.js';
import type { LoggedIn } from './logged-in.js';

export function serveForward(
  c: LoggedIn,
  accept: AcceptConnection<ServerChannel>,
  reject: RejectConnection,
  info: TcpipRequestInfo,
): void {
  let done = false;
  let target: ForwardTarget | undefined;
  let tcp: net.Socket | undefined;
  let channel: ServerChannel | undefined;
  const finish = (_reason: string, _why?: AuthEnded) => {
    if (done) return;
    done = true;
    release?.();
    target?.release();
    tcp?.destroy();
    channel?.close();
  };
  const release = c.hold(finish);
  if (!release) return reject();
  const log = { app: c.login.app, to: `${info.destIP}:${info.destPort}`, ip: c.ip };

  admitForward(c.deps.ctx, c.deps.rateLimiter, c.login, info.destIP, info.destPort).then(
    (admitted) => {
      target = admitted;
      if (done) return admitted.release();
      const socket = net.connect({ host: admitted.host, port: admitted.port, noDelay: true });
      tcp = socket;
      socket.once('connect', () => {
        if (done) return;
        const ch = accept();
        channel = ch;
        ch.on('error', () => finish('client-error'));
        c.deps.log.info({ ...log, target: admitted.what }, 'ssh gateway: forward opened');
        socket.setTimeout(TUNNEL_LIMITS.idleMs, () => finish('idle'));
        socket.pipe(ch);
        ch.pipe(socket);
        ch.on('close', () => finish('client-closed'));
        socket.on('close', () => finish('closed'));
      });
      socket.on('error', (err: NodeJS.ErrnoException) => {
        c.deps.log.warn({ ...log, err: err.code ?? err.message }, 'ssh gateway: forward failed');
        if (!channel) reject();
        finish('host-error');
      });
    },
    (err: unknown) => {
      if (!(err instanceof ApiError)) c.deps.log.error({ err, ...log }, 'ssh gateway: forward');
      else c.deps.log.info({ ...log, code: err.code }, 'ssh gateway: forward refused');
      reject();
      finish('refused');
    },
  );
}
