/**
 * One HTTP exchange with one machine. The request body is not read until the
 * connection is up, so a machine that refuses leaves the body untouched for the next
 * one (`ConnectFailure`). Bodies are piped both ways: nothing is buffered beyond the
 * streams' own high-water marks, and a slow reader slows the writer on the far side.
 */
import http from 'node:http';
import { ApiError } from '../errors/api-error.js';
import { answerError } from './answer.js';
import { downstreamResponseHeaders, upstreamRequestHeaders } from './headers.js';
import { hostName } from './host.js';
import { ConnectFailure, asConnectFailure } from './picker.js';
import type { ProxyTarget } from './types.js';

/** What an exchange needs from the proxy. */
export interface ExchangeContext {
  agent: http.Agent;
  connectTimeoutMs: number;
  responseTimeoutMs: number;
  trustForwarded: boolean;
  /** Names no app's cookie may reach (set-cookie.ts): the public host, the apps' domain. */
  guardedHosts: readonly string[];
  /** Called once the connection to the machine is up. */
  onConnected(target: ProxyTarget): void;
}

class ResponseTimeout extends Error {}

/** Whether the request carries a body (RFC 9112 6.3: only these two headers announce one). */
function hasBody(req: http.IncomingMessage): boolean {
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

/**
 * Forwards `req` to `target` and its answer to `res`. Rejects with ConnectFailure when
 * the machine cannot be reached (nothing was sent, nothing answered); otherwise resolves
 * once the exchange is over, having answered the client itself (502/504 on failure).
 */
export function exchange(
  req: http.IncomingMessage,
  res: http.ServerResponse,
  target: ProxyTarget,
  ctx: ExchangeContext,
  retriesLeft = 1,
): Promise<void> {
  return new Promise((resolve, reject) => {
    // The client may have left while a machine was being woken.
    if (res.destroyed) {
      resolve();
      return;
    }
    const withBody = hasBody(req);
    const upReq = http.request({
      host: target.host,
      port: target.port,
      method: req.method,
      path: req.url,
      headers: upstreamRequestHeaders(req, { trustForwarded: ctx.trustForwarded }),
      // A retry takes a connection of its own: the pool may hold more connections the
      // machine has closed meanwhile (it picks the newest first), and a retry through it
      // would fail the same way.
      agent: retriesLeft > 0 ? ctx.agent : false,
      setHost: false,
    });
    let connected = false;
    let answered = false;
    let connectTimer: NodeJS.Timeout | undefined;
    let responseTimer: NodeJS.Timeout | undefined;

    const onConnect = (): void => {
      clearTimeout(connectTimer);
      connected = true;
      ctx.onConnected(target);
      if (withBody) req.pipe(upReq);
      else upReq.end();
    };
    upReq.on('socket', (socket) => {
      if (!socket.connecting) return onConnect();
      // Only a new connection can be slow to come up (the agent queues no request: it
      // has no socket limit); a kept-alive one needs no timer.
      connectTimer = setTimeout(
        () => upReq.destroy(new ConnectFailure('timeout')),
        ctx.connectTimeoutMs,
      );
      socket.once('connect', onConnect);
    });
    // The machine's time to answer counts from the end of the upload, so a long upload
    // to a machine that answers at the end is not cut short.
    upReq.on('finish', () => {
      if (answered) return;
      responseTimer = setTimeout(() => upReq.destroy(new ResponseTimeout()), ctx.responseTimeoutMs);
    });

    upReq.on('response', (upRes) => {
      clearTimeout(responseTimer);
      answered = true;
      if (res.destroyed) {
        upReq.destroy();
        resolve();
        return;
      }
      res.writeHead(
        upRes.statusCode ?? 502,
        upRes.statusMessage,
        downstreamResponseHeaders(upRes.rawHeaders, {
          host: hostName(req.headers.host ?? ''),
          guarded: ctx.guardedHosts,
        }),
      );
      upRes.pipe(res);
      // A machine that dies mid-answer leaves a truncated reply; cutting the client's
      // connection is how it learns the body is incomplete.
      upRes.on('error', () => res.destroy());
      upRes.on('aborted', () => res.destroy());
      upRes.on('end', () => resolve());
    });

    // A client that aborts mid-upload ends the machine's request too.
    req.on('error', () => upReq.destroy());
    res.on('error', () => upReq.destroy());
    // The client went away (or its answer finished): release the machine's connection.
    res.on('close', () => {
      clearTimeout(connectTimer);
      clearTimeout(responseTimer);
      if (!res.writableFinished) upReq.destroy();
      resolve();
    });

    upReq.on('error', (err) => {
      clearTimeout(connectTimer);
      clearTimeout(responseTimer);
      if (!connected) {
        reject(asConnectFailure(err));
        return;
      }
      if (answered || res.destroyed || res.writableEnded) {
        res.destroy();
        resolve();
        return;
      }
      // A kept-alive connection the machine had already closed fails on first use.
      // Without a body nothing was lost, so the same request goes again on a new connection.
      if (upReq.reusedSocket && !withBody && retriesLeft > 0) {
        exchange(req, res, target, ctx, retriesLeft - 1).then(resolve, reject);
        return;
      }
      answerError(
        res,
        err instanceof ResponseTimeout
          ? new ApiError('upstream-timeout', "The app's machine did not answer in time.")
          : new ApiError(
              'upstream-failed',
              "The app's machine closed the connection without an answer.",
            ),
      );
      resolve();
    });
  });
}
