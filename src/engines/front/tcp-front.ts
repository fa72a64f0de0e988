/**
 * The per-database TCP front: the public port a client connects to, piping bytes
 * untouched (TLS included, end to end) to the server's private port on 127.0.0.1. Owning
 * this hop is what lets the platform see activity, put an idle database to sleep, and
 * wake it when a client connects or sends on a connection it kept open.
 */
import net from 'node:net';
import type { AdmitPeer } from './client-policy.js';
import { Link, type Activity, type FrontErrorPhase, type LinkContext } from './link.js';

export type { FrontErrorPhase } from './link.js';

export interface TcpFrontOptions {
  /** Address to listen on (e.g. `0.0.0.0`, `::` or `127.0.0.1`). */
  host: string;
  /** Port to listen on; 0 picks a free one (read it from `port` after `listen()`). */
  port: number;
  /** The server's private port on 127.0.0.1; change it later with `setTarget`. */
  targetPort: number;
  /**
   * Awaited before each new upstream connection is dialed: thaws or starts the database.
   * The client is held paused meanwhile (its early bytes wait, in order). A rejection
   * closes that client and is reported with phase `wake`. Called once per connection;
   * sharing one wake between concurrent connects is the hook's business.
   */
  beforeConnect?: () => Promise<void>;
  /**
   * Called for each chunk a client sends on an open connection. Return undefined when the
   * database is awake (the hot path: no promise per chunk); return a promise to hold that
   * connection's bytes until it resolves. A rejection closes the connection (phase `traffic`).
   */
  beforeTraffic?: () => Promise<void> | undefined;
  /** Failures worth a log line: wake or traffic hooks rejected, upstream unreachable, server error. */
  onError?: (err: Error, phase: FrontErrorPhase) => void;
  /** Pause between dial attempts refused by the target (default 10 ms). */
  connectRetryMs?: number;
  /** How long refused dials are retried before the client is closed (default 5 s). */
  connectTimeoutMs?: number;
  /** How long a socket whose peer closed cleanly may take to finish its half (default 10 s). */
  halfCloseGraceMs?: number;
  /**
   * TCP keepalive delay on client sockets (default 60 s), so a client that vanished
   * (NAT expiry, dead host) does not count as an open connection for ever and keep its
   * database awake. 0 disables it.
   */
  clientKeepAliveMs?: number;
  /**
   * Whether a peer may connect (client-policy.ts: the host and the machines' network);
   * absent, everyone may. A refused peer is reset before a byte is read or a database
   * woken, counted in `refusedConnections` and reported to `onRefused`.
   */
  admit?: AdmitPeer;
  onRefused?: (remoteAddress: string | undefined) => void;
}

function checkPort(port: number, allowZero: boolean): number {
  if (!Number.isInteger(port) || port < (allowZero ? 0 : 1) || port > 65535) {
    throw new RangeError(`invalid TCP port: ${port}`);
  }
  return port;
}

/** A TCP listener that splices each client connection to the database's current port. */
export class TcpFront {
  private readonly server: net.Server;
  private readonly links = new Set<Link>();
  private readonly activity: Activity = { at: Date.now() };
  private readonly ctx: LinkContext;
  private target: number;
  private boundPort: number | undefined;
  private closing = false;
  private closed: Promise<void> | undefined;
  private refused = 0;

  constructor(private readonly opts: TcpFrontOptions) {
    checkPort(opts.port, true);
    this.target = checkPort(opts.targetPort, false);
    const report = opts.onError ?? (() => {});
    this.ctx = {
      activity: this.activity,
      upstreamHost: '127.0.0.1',
      targetPort: () => this.target,
      beforeConnect: opts.beforeConnect,
      beforeTraffic: opts.beforeTraffic,
      connectRetryMs: opts.connectRetryMs ?? 10,
      connectTimeoutMs: opts.connectTimeoutMs ?? 5_000,
      halfCloseGraceMs: opts.halfCloseGraceMs ?? 10_000,
      closing: () => this.closing,
      report,
    };
    const keepAlive = opts.clientKeepAliveMs ?? 60_000;
    this.server = net.createServer(
      {
        // Each direction ends on its own: a client's FIN must not cut the server's reply.
        allowHalfOpen: true,
        // Nothing is read from a client until its upstream is ready: early bytes wait.
        pauseOnConnect: true,
        noDelay: true,
        keepAlive: keepAlive > 0,
        keepAliveInitialDelay: keepAlive,
      },
      (client) => this.accept(client),
    );
  }

  /**
   * Starts listening; resolves with the bound port. Rejects with the server's own error
   * (`code` `EADDRINUSE`, `EACCES`…) so a caller can pick another port with a new front.
   */
  listen(): Promise<number> {
    return new Promise((resolve, reject) => {
      const onError = (err: Error) => {
        this.server.off('listening', onListening);
        reject(err);
      };
      const onListening = () => {
        this.server.off('error', onError);
        this.server.on('error', (err) => this.ctx.report(err, 'server'));
        this.boundPort = (this.server.address() as net.AddressInfo).port;
        resolve(this.boundPort);
      };
      this.server.once('error', onError);
      this.server.once('listening', onListening);
      this.server.listen({ host: this.opts.host, port: this.opts.port });
    });
  }

  /** The bound port once listening (the requested one before). */
  get port(): number {
    return this.boundPort ?? this.opts.port;
  }

  /** The port new connections are dialed to. */
  get targetPort(): number {
    return this.target;
  }

  /** Points new connections at `port` (a promoted standby); open ones stay where they are. */
  setTarget(port: number): void {
    this.target = checkPort(port, false);
  }

  /** Client connections accepted and not yet closed (waking, dialing or spliced). */
  get openConnections(): number {
    return this.links.size;
  }

  /** Connections refused by `admit` since the front opened. */
  get refusedConnections(): number {
    return this.refused;
  }

  /** Time (ms since the epoch) of the last byte either way, or the last open or close. */
  get lastActivityAt(): number {
    return this.activity.at;
  }

  /**
   * Stops listening and destroys every open connection (both sockets); resolves when the
   * listener and all sockets are closed. Idempotent.
   */
  close(): Promise<void> {
    this.closed ??= this.shutdown();
    return this.closed;
  }

  private async shutdown(): Promise<void> {
    this.closing = true;
    const sockets: net.Socket[] = [];
    for (const link of this.links) {
      sockets.push(link.client);
      if (link.upstream) sockets.push(link.upstream);
    }
    const listenerClosed = new Promise<void>((resolve) => {
      if (!this.server.listening) resolve();
      else this.server.close(() => resolve());
    });
    const socketsClosed = sockets
      .filter((s) => !s.closed)
      .map((s) => new Promise<void>((resolve) => s.once('close', () => resolve())));
    for (const link of this.links) link.destroy();
    await Promise.all([listenerClosed, ...socketsClosed]);
  }

  private accept(client: net.Socket): void {
    if (this.closing) {
      client.destroy();
      return;
    }
    const peer = client.remoteAddress;
    if (this.opts.admit && !this.opts.admit(peer)) {
      // A reset, not a FIN: the peer learns at once that it is refused, and a refused
      // peer never wakes the database nor counts as its activity.
      this.refused++;
      client.on('error', () => {});
      client.resetAndDestroy();
      this.opts.onRefused?.(peer);
      return;
    }
    const link = new Link(client, this.ctx);
    this.links.add(link);
    this.activity.at = Date.now();
    client.once('close', () => {
      this.links.delete(link);
      this.activity.at = Date.now();
    });
    void link.start();
  }
}
