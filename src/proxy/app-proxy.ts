/**
 * `AppProxy`: app traffic on the API's own listener. A request whose `Host` is
 * `<app>.<public host>` (or `<port>.<app>.<public host>` for an exposed port) goes to
 * one of the app's machines; everything else is not the proxy's (`appFromHost` says so,
 * and the API serves it).
 */
import http from 'node:http';
import type { Duplex } from 'node:stream';
import { ApiError } from '../errors/api-error.js';
import { answerError, answerErrorRaw } from './answer.js';
import { exchange, type ExchangeContext } from './forward.js';
import { hostName, normalizePublicHost, parseAppHost, type AppAddress } from './host.js';
import { TargetPicker } from './picker.js';
import { answerVerdict, answerVerdictRaw, type AccessGate } from './protection.js';
import { confineHeadCookies } from './set-cookie.js';
import { connectTo, splice } from './tunnel.js';
import type { AppProxyOptions, ProxyLog, ProxyTarget, ProxyTargets } from './types.js';

/** Routes app hosts to the app's machines; one per process, shared by every request. */
export class AppProxy {
  /** The host apps' default addresses end in: the public host, or PIER_APPS_DOMAIN. */
  private readonly publicHost: string;
  private readonly targets: ProxyTargets;
  private readonly log: ProxyLog;
  private readonly picker: TargetPicker;
  private readonly exchangeContext: ExchangeContext;
  private readonly responseTimeoutMs: number;
  private readonly connectTimeoutMs: number;
  private readonly trustForwarded: boolean;
  private readonly resolveHost: AppProxyOptions['resolveHost'];
  private readonly gate: AccessGate | undefined;
  /** Names no app's cookie may reach: the public host (and the apps' domain). */
  private readonly guardedHosts: readonly string[];
  // Kept-alive connections to machines: most of the proxy's cost saved on busy apps.
  private readonly agent = new http.Agent({
    keepAlive: true,
    maxFreeSockets: 256,
    scheduling: 'lifo',
  });
  // Upgraded connections belong to no server any more; close() ends them.
  private readonly tunnels = new Set<Duplex>();

  constructor(options: AppProxyOptions) {
    this.publicHost = normalizePublicHost(options.appsDomain ?? options.publicHost);
    this.targets = options.targets;
    this.log = options.log;
    this.picker = new TargetPicker(options.targets, options.log);
    this.connectTimeoutMs = options.connectTimeoutMs ?? 5_000;
    this.responseTimeoutMs = options.responseTimeoutMs ?? 60_000;
    this.trustForwarded = options.trustForwarded ?? false;
    this.resolveHost = options.resolveHost;
    this.gate = options.gate;
    this.guardedHosts = [...new Set([normalizePublicHost(options.publicHost), this.publicHost])];
    this.exchangeContext = {
      agent: this.agent,
      connectTimeoutMs: this.connectTimeoutMs,
      responseTimeoutMs: this.responseTimeoutMs,
      trustForwarded: this.trustForwarded,
      guardedHosts: this.guardedHosts,
      onConnected: (target) => this.touch(target),
    };
  }

  /**
   * The app a `Host` header names, or undefined when it is not an app host (the API's
   * own host, another domain), so the caller lets the API serve the request.
   */
  appFromHost(hostHeader: string | undefined): string | undefined {
    return parseAppHost(hostHeader, this.publicHost)?.app;
  }

  /**
   * The app and exposed port (if any) a `Host` header names: a default address, else
   * a custom domain or zone name (`resolveHost`).
   */
  addressFromHost(
    hostHeader: string | undefined,
    req?: http.IncomingMessage,
  ): AppAddress | undefined {
    const address = parseAppHost(hostHeader, this.publicHost);
    if (address || !hostHeader || !req || !this.resolveHost) return address;
    return this.resolveHost(hostHeader, req);
  }

  /**
   * Serves one request of an app host: forwards it to a machine and streams the answer
   * back, or answers `{error, code}` itself. Never rejects.
   */
  async handle(
    req: http.IncomingMessage,
    res: http.ServerResponse,
    /** The address of the request's `Host`, when the caller already asked `addressFromHost`. */
    known?: AppAddress,
  ): Promise<void> {
    try {
      const address = known ?? this.addressOrThrow(req);
      if (address.redirect) {
        res.writeHead(308, { location: address.redirect, 'content-length': 0 }).end();
        return;
      }
      // Protection first: nothing of a refused request reaches (or wakes) a machine.
      const verdict = await this.gate?.check(req, address.app, false);
      if (verdict && !verdict.pass) return answerVerdict(res, verdict);
      await this.picker.connect(address, async (target) => {
        // Counted while it lasts, so a deploy retiring the machine waits for it to end.
        this.targets.begin?.(target.machineId);
        try {
          return await exchange(req, res, target, this.exchangeContext);
        } finally {
          this.targets.end?.(target.machineId);
        }
      });
    } catch (err) {
      answerError(res, this.toApiError(err, req));
    }
  }

  /**
   * Serves an `upgrade` event of an app host (WebSocket): tunnels the connection to a
   * machine, or answers `{error, code}` on the raw socket. Never rejects.
   */
  async upgrade(req: http.IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
    // After an upgrade the server no longer listens for errors on the socket; a client
    // that resets it before the tunnel exists (or during an error answer) must not
    // crash the process.
    socket.on('error', () => undefined);
    try {
      const address = this.addressOrThrow(req);
      const verdict = await this.gate?.check(req, address.app, true);
      if (verdict && !verdict.pass) return answerVerdictRaw(socket, verdict);
      const upstream = await this.picker.connect(address, async (target) => {
        const s = await connectTo(target, this.connectTimeoutMs);
        this.touch(target);
        return { socket: s, target };
      });
      if (socket.destroyed) {
        upstream.socket.destroy();
        return;
      }
      this.tunnels.add(socket);
      this.targets.begin?.(upstream.target.machineId);
      socket.once('close', () => {
        this.tunnels.delete(socket);
        this.targets.end?.(upstream.target.machineId);
      });
      splice(req, socket, head, upstream.socket, {
        responseTimeoutMs: this.responseTimeoutMs,
        trustForwarded: this.trustForwarded,
        rewriteHead: (h) =>
          confineHeadCookies(h, {
            host: hostName(req.headers.host ?? ''),
            guarded: this.guardedHosts,
          }),
        onTraffic: () => this.touch(upstream.target),
      });
    } catch (err) {
      answerErrorRaw(socket, this.toApiError(err, req));
    }
  }

  /**
   * Ends open tunnels. An upgraded socket still counts as a connection of its server,
   * so `server.close()` waits for it: call this first on shutdown.
   */
  closeTunnels(): void {
    for (const socket of this.tunnels) socket.destroy();
    this.tunnels.clear();
  }

  /** Ends open tunnels and the kept-alive connections to machines (shutdown). */
  close(): void {
    this.closeTunnels();
    this.agent.destroy();
  }

  private addressOrThrow(req: http.IncomingMessage): AppAddress {
    const address = this.addressFromHost(req.headers.host, req);
    if (!address) throw new ApiError('not-found', 'This host names no app.');
    return address;
  }

  private touch(target: ProxyTarget): void {
    try {
      this.targets.touch(target.machineId);
    } catch (err) {
      // Idle accounting must never fail a request.
      this.log.warn({ machineId: target.machineId, err }, 'proxy: touch failed');
    }
  }

  private toApiError(err: unknown, req: http.IncomingMessage): ApiError {
    if (err instanceof ApiError) return err;
    // The path only: an app's query strings are its own (tokens, signatures) and stay out
    // of pier's logs.
    const path = req.url?.split('?')[0];
    this.log.error({ err, host: req.headers.host, path }, 'proxy: request failed');
    return new ApiError('upstream-failed', "The app's machine could not be reached.");
  }
}
