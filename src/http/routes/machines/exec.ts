/**
 * Shell sessions (spec 4.9): `GET /v1/machines/:id/exec` upgrades to a WebSocket that
 * carries one process inside the machine; without an upgrade it answers 426
 * `upgrade-required`. `GET /v1/machines/:id/exec-sessions` lists the open ones.
 *
 * Every check, and the audit row, happen before the upgrade (a preHandler), so a refusal
 * is an ordinary HTTP answer with the usual error body. The frames, as docs/api.md says:
 * binary frames are `[channel, ...bytes]` (0 stdin from the client; 1 stdout, 2 stderr
 * from the server), text frames are JSON (`resize`, `eof` from the client; `exit`, and
 * `error` when the host fails after the upgrade, from the server).
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import type { WebSocket } from 'ws';
import {
  execClientMessage as clientMessage,
  execQuery,
  execSessionListSchema,
  execSessionsQuery,
  machineIdParams as params,
} from '../../../contracts/machines.js';
import { ApiError } from '../../../errors/api-error.js';
import {
  admitExecSession,
  endExecSession,
  listExecSessions,
  startExecSession,
  type AdmittedSession,
} from '../../../services/machines/exec-sessions.js';
import { AuthEnded } from '../../../services/authenticator.js';
import type { ServiceContext } from '../../../services/context.js';
import type { AppDeps } from '../../deps.js';
import { principalOf } from '../../plugins/auth.js';
import { auth } from '../../route-auth.js';
import { appOfMachine } from './machine-app.js';

const tags = ['machines'];

declare module 'fastify' {
  interface FastifyRequest {
    execSession?: AdmittedSession;
  }
}

export function machineExecRoutes(root: FastifyInstance, { ctx, rateLimiter }: AppDeps): void {
  const app = root.withTypeProvider<ZodTypeProvider>();
  const appOf = appOfMachine(ctx);

  app.route({
    method: 'GET',
    url: '/v1/machines/:id/exec',
    config: { auth: { ...auth.F('AW'), appOf } },
    schema: {
      tags,
      summary: 'A shell session in the machine, over a WebSocket (426 without the upgrade)',
      params,
      querystring: execQuery,
    },
    preHandler: async (req) => {
      if (!req.ws) return; // the handler answers 426
      const q = req.query;
      const argv = q.cmd === undefined ? undefined : Array.isArray(q.cmd) ? q.cmd : [q.cmd];
      const p = principalOf(req);
      req.execSession = await admitExecSession(
        ctx,
        rateLimiter,
        { orgId: p.orgId, keyId: p.key.id, agent: p.key.agent !== null, ip: req.ip },
        req.params.id,
        { argv, tty: q.tty ?? argv === undefined, cols: q.cols ?? 80, rows: q.rows ?? 24 },
      );
    },
    handler: async () => {
      throw new ApiError(
        'upgrade-required',
        'This route opens a shell over a WebSocket: send `Connection: Upgrade` and `Upgrade: websocket`.',
      );
    },
    wsHandler: (socket, req) => bridge(ctx, socket, req, principalOf(req).signal),
  });

  app.get('/v1/machines/:id/exec-sessions', {
    config: { auth: { ...auth.R('AA'), appOf } },
    schema: {
      tags,
      summary: 'Shell sessions open on the machine (all=true: the last 100 of any kind)',
      params,
      querystring: execSessionsQuery,
      response: { 200: execSessionListSchema },
    },
    handler: async (req) =>
      listExecSessions(ctx, principalOf(req).orgId, req.params.id, req.query.all ?? false),
  });
}

/** The close code of a session ended because its key or organization no longer may. */
export const CLOSE_AUTH_ENDED = 1008;

/**
 * Carries one admitted session over its WebSocket. `signal` is the key's: when the key is
 * revoked or expires, or the organization is suspended (on any replica), the process is
 * killed, the row closed with that reason, and the client told, then closed with 1008.
 */
function bridge(
  ctx: ServiceContext,
  socket: WebSocket,
  req: FastifyRequest,
  signal: AbortSignal,
): void {
  const admitted = req.execSession;
  if (!admitted) {
    socket.close(1011, 'session not admitted');
    return;
  }
  // Frames that arrive while the process starts are kept and replayed in order.
  const early: [Buffer, boolean][] = [];
  let onMessage = (data: Buffer, binary: boolean) => void early.push([data, binary]);
  socket.on('message', (data: Buffer, binary: boolean) => onMessage(data, binary));
  let exited = false;
  let closed = false;
  /** Why the session was ended from here (the key or organization), if it was. */
  let ended: string | undefined;
  const onAuthEnded = () => {
    if (exited || ended) return;
    const why = signal.reason instanceof AuthEnded ? signal.reason : new AuthEnded('revoked');
    ended = why.reason;
    endExecSession(ctx, admitted.id, why.reason);
    if (socket.readyState === socket.OPEN) {
      socket.send(JSON.stringify({ type: 'error', ...why.toBody(), reason: why.reason }));
      socket.close(CLOSE_AUTH_ENDED, why.reason);
    }
  };
  socket.on('close', () => {
    closed = true;
    signal.removeEventListener('abort', onAuthEnded);
    if (!exited && !ended) endExecSession(ctx, admitted.id, 'client-closed');
  });
  if (signal.aborted) onAuthEnded();
  else signal.addEventListener('abort', onAuthEnded, { once: true });

  startExecSession(ctx, admitted).then(
    (session) => {
      // The client left, or the key ended, while the process was starting.
      if (closed || ended) return endExecSession(ctx, admitted.id, ended ?? 'client-closed');
      session.onData((stream, data) => {
        if (socket.readyState !== socket.OPEN) return;
        socket.send(Buffer.concat([Buffer.of(stream === 'stdout' ? 1 : 2), data]), {
          binary: true,
        });
      });
      session.onExit((code, signal) => {
        exited = true;
        if (socket.readyState !== socket.OPEN) return;
        socket.send(JSON.stringify({ type: 'exit', code, signal }));
        socket.close(1000, 'exited');
      });
      onMessage = (data, binary) => {
        if (binary) {
          if (data[0] === 0) session.write(data.subarray(1));
          return;
        }
        const parsed = clientMessage.safeParse(safeJson(data.toString('utf8')));
        if (!parsed.success) return; // unknown control messages are ignored, as in a terminal
        if (parsed.data.type === 'resize') session.resize(parsed.data.cols, parsed.data.rows);
        else session.end();
      };
      for (const [data, binary] of early.splice(0)) onMessage(data, binary);
    },
    (err: unknown) => {
      exited = true;
      if (ended) return;
      const e = err instanceof ApiError ? err : new ApiError('host-error');
      if (socket.readyState === socket.OPEN) {
        socket.send(JSON.stringify({ type: 'error', ...e.toBody() }));
        socket.close(1011, e.code);
      }
    },
  );
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
