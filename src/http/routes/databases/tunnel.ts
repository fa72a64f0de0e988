/**
 * Database tunnels (issue 13 item 5): `GET /v1/resources/:name/tunnel` upgrades to a
 * WebSocket whose binary frames are the raw bytes of one TCP connection to the database's
 * front, the way `fly proxy` works. Fronts serve only the host and the machines' network
 * (engines/front/client-policy.ts), so this is how a person's psql or redis-cli reaches
 * a database; `pier db connect` and `pier db proxy` open one per local connection. TLS
 * is end to end between the client and the server: pier carries it without reading it.
 *
 * As with shell sessions (machines/exec.ts), every check comes before the upgrade (a
 * preHandler), so a refusal is an ordinary HTTP answer; agent tokens are judged and
 * audited by the auth plugin like on every route; the key's signal ends the tunnel when
 * the key is revoked or expires or its organization is suspended, on any replica.
 */
import net from 'node:net';
import type { FastifyBaseLogger, FastifyInstance, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import type { WebSocket } from 'ws';
import { databaseParams as params } from '../../../contracts/databases.js';
import { ApiError } from '../../../errors/api-error.js';
import { AuthEnded } from '../../../services/authenticator.js';
import { assertCreditOpen } from '../../../services/billing/blocking.js';
import {
  admitTunnel,
  TUNNEL_LIMITS,
  type AdmittedTunnel,
} from '../../../services/databases/tunnels.js';
import type { AppDeps } from '../../deps.js';
import { principalOf } from '../../plugins/auth.js';
import { auth } from '../../route-auth.js';
import { CLOSE_AUTH_ENDED } from '../machines/exec.js';

const tags = ['databases'];

declare module 'fastify' {
  interface FastifyRequest {
    databaseTunnel?: AdmittedTunnel;
  }
}

export function databaseTunnelRoutes(root: FastifyInstance, { ctx, rateLimiter }: AppDeps): void {
  const app = root.withTypeProvider<ZodTypeProvider>();

  app.route({
    method: 'GET',
    url: '/v1/resources/:name/tunnel',
    // Full keys only (the bytes are the data); agents as for data reads: a production
    // token needs prodDataRead, and a token limited to apps is refused (a database is the
    // organization's, not an app's).
    config: { auth: auth.F('AD') },
    schema: {
      tags,
      summary: "A TCP connection to the database's front, over a WebSocket (426 without it)",
      params,
    },
    preHandler: async (req) => {
      // A GET, yet a read-write connection that would wake the database: refused while
      // the credit is blocked (the database is stopped then), upgraded or not.
      await assertCreditOpen(ctx.db, principalOf(req).orgId);
      if (!req.ws) return; // the handler answers 426
      const tunnel = await admitTunnel(ctx, rateLimiter, principalOf(req).orgId, req.params.name);
      req.databaseTunnel = tunnel;
      // Its place is given back when the connection ends, upgraded or not.
      const sock = req.raw.socket;
      if (sock.destroyed) tunnel.release();
      else sock.once('close', tunnel.release);
    },
    handler: async () => {
      throw new ApiError(
        'upgrade-required',
        'This route carries a database connection over a WebSocket: send `Connection: Upgrade` and `Upgrade: websocket`.',
      );
    },
    wsHandler: (socket, req) => carry(socket, req, principalOf(req).signal, req.log),
  });
}

/**
 * Splices the WebSocket and a TCP connection to the front. Each direction stops reading
 * its source while more than `highWaterBytes` wait for the other side, so a slow reader
 * slows its writer and pier's memory stays bounded; no byte either way for `idleMs`
 * closes the tunnel (1000 `idle`).
 */
function carry(
  socket: WebSocket,
  req: FastifyRequest,
  signal: AbortSignal,
  log: FastifyBaseLogger,
): void {
  const tunnel = req.databaseTunnel;
  if (!tunnel) {
    socket.close(1011, 'tunnel not admitted');
    return;
  }
  const highWater = TUNNEL_LIMITS.highWaterBytes;
  const tcp = net.connect({ host: tunnel.host, port: tunnel.port, noDelay: true });
  let done = false;
  const finish = (code: number, reason: string, frame?: Record<string, unknown>) => {
    if (done) return;
    done = true;
    clearTimeout(idle);
    signal.removeEventListener('abort', onAuthEnded);
    tcp.destroy();
    tunnel.release();
    if (socket.readyState === socket.OPEN) {
      if (frame) socket.send(JSON.stringify(frame));
      socket.close(code, reason);
    }
    log.info({ database: tunnel.name, reason }, 'database tunnel closed');
  };
  const idle = setTimeout(() => finish(1000, 'idle'), TUNNEL_LIMITS.idleMs);
  idle.unref();

  const onAuthEnded = () => {
    const why = signal.reason instanceof AuthEnded ? signal.reason : new AuthEnded('revoked');
    finish(CLOSE_AUTH_ENDED, why.reason, { type: 'error', ...why.toBody(), reason: why.reason });
  };
  if (signal.aborted) return onAuthEnded();
  signal.addEventListener('abort', onAuthEnded, { once: true });
  log.info({ database: tunnel.name }, 'database tunnel opened');

  // Client → database. Until connected, net queues the writes; the same limit applies.
  socket.on('message', (data: Buffer, binary: boolean) => {
    if (!binary || done) return; // text frames are not part of the stream
    idle.refresh();
    tcp.write(data);
    if (tcp.writableLength >= highWater) socket.pause();
  });
  tcp.on('drain', () => {
    if (!done) socket.resume();
  });

  // Database → client.
  const resumeTcp = () => {
    if (!done && tcp.isPaused() && socket.bufferedAmount < highWater) tcp.resume();
  };
  tcp.on('data', (chunk: Buffer) => {
    idle.refresh();
    if (socket.readyState !== socket.OPEN) return;
    socket.send(chunk, { binary: true }, resumeTcp);
    if (socket.bufferedAmount >= highWater) tcp.pause();
  });

  tcp.on('error', (err: NodeJS.ErrnoException) => {
    log.warn({ err, database: tunnel.name }, 'database tunnel: the front failed');
    const e = new ApiError('host-error', `The database did not answer: ${err.code ?? err.message}`);
    finish(1011, 'host-error', { type: 'error', ...e.toBody() });
  });
  // The server closed its side (a client's Terminate, an idle server, a restart).
  tcp.on('close', () => finish(1000, 'closed'));
  socket.on('close', () => finish(1000, 'client-closed'));
}
