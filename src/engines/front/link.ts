/**
 * One client connection of a TCP front and the upstream connection it is spliced to: the
 * wake before dialing, the dial with retries, the byte pumps and the teardown. Kept apart
 * from the listener (tcp-front.ts) so each file reads on its own.
 */
import net from 'node:net';

/** Where the front's activity clock lives; pumps write it on every chunk (a number, no objects). */
export interface Activity {
  at: number;
}

/** Which step failed, for the owner's log. */
export type FrontErrorPhase = 'wake' | 'traffic' | 'upstream' | 'server';

/** What a link needs from its front; one object shared by all of a front's links. */
export interface LinkContext {
  readonly activity: Activity;
  readonly upstreamHost: string;
  /** Read at each dial attempt, so a target changed during a retry loop is honoured. */
  targetPort(): number;
  readonly beforeConnect: (() => Promise<void>) | undefined;
  readonly beforeTraffic: (() => Promise<void> | undefined) | undefined;
  readonly connectRetryMs: number;
  readonly connectTimeoutMs: number;
  readonly halfCloseGraceMs: number;
  /** True once the front is closing: links in their wake or dial stop there. */
  closing(): boolean;
  report(err: Error, phase: FrontErrorPhase): void;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

function asError(err: unknown): Error {
  return err instanceof Error ? err : new Error(String(err));
}

export class Link {
  /** The upstream socket once dialed (also while a dial attempt is in flight). */
  upstream: net.Socket | undefined;
  private spliced = false;

  constructor(
    readonly client: net.Socket,
    private readonly ctx: LinkContext,
  ) {
    // Until spliced, a client error only needs the socket gone; 'close' does the rest.
    client.on('error', () => {});
    client.once('close', (hadError) => {
      if (this.spliced && this.upstream) this.release(this.upstream, hadError);
      else this.upstream?.destroy();
    });
  }

  /** True once the client is gone or the front is closing: the setup stops at the next step. */
  private get abandoned(): boolean {
    return this.client.destroyed || this.ctx.closing();
  }

  /**
   * Wakes the database, dials it and splices the two sockets. The client was accepted
   * paused (`pauseOnConnect`), so whatever it sends meanwhile waits in the kernel and in
   * the socket's buffer, in order, and flows once the splice resumes it.
   */
  async start(): Promise<void> {
    const { ctx, client } = this;
    if (ctx.beforeConnect) {
      try {
        await ctx.beforeConnect();
      } catch (err) {
        ctx.report(asError(err), 'wake');
        client.destroy();
        return;
      }
    }
    if (this.abandoned) return;
    let upstream: net.Socket | undefined;
    try {
      upstream = await this.dialWithRetry();
    } catch (err) {
      ctx.report(asError(err), 'upstream');
      client.destroy();
      return;
    }
    if (!upstream) return;
    if (this.abandoned) {
      upstream.destroy();
      return;
    }
    this.splice(upstream);
  }

  /**
   * Dials the target, retrying refusals every `connectRetryMs` up to `connectTimeoutMs`:
   * a server just started by the wake hook may not listen yet. Other errors fail at once.
   * Undefined when the client left (or the front closed) meanwhile.
   */
  private async dialWithRetry(): Promise<net.Socket | undefined> {
    const deadline = Date.now() + this.ctx.connectTimeoutMs;
    for (;;) {
      if (this.abandoned) return undefined;
      try {
        return await this.dial(this.ctx.targetPort());
      } catch (err) {
        if (this.abandoned) return undefined;
        const code = (err as NodeJS.ErrnoException).code;
        if (code !== 'ECONNREFUSED' || Date.now() + this.ctx.connectRetryMs > deadline) throw err;
      }
      await sleep(this.ctx.connectRetryMs);
    }
  }

  private dial(port: number): Promise<net.Socket> {
    return new Promise((resolve, reject) => {
      const sock = net.connect({ host: this.ctx.upstreamHost, port, noDelay: true });
      this.upstream = sock;
      const onError = (err: Error) => {
        sock.off('connect', onConnect);
        sock.off('close', onClose);
        reject(err);
      };
      // A socket destroyed without an error (the client left, the front closed) only closes.
      const onClose = () => {
        sock.off('connect', onConnect);
        sock.off('error', onError);
        reject(Object.assign(new Error('upstream dial abandoned'), { code: 'EABANDONED' }));
      };
      const onConnect = () => {
        sock.off('error', onError);
        sock.off('close', onClose);
        resolve(sock);
      };
      sock.once('error', onError);
      sock.once('close', onClose);
      sock.once('connect', onConnect);
    });
  }

  private splice(upstream: net.Socket): void {
    const { client, ctx } = this;
    this.spliced = true;
    upstream.on('error', () => {});
    upstream.once('close', (hadError) => this.release(client, hadError));
    pump(client, upstream, ctx.activity, ctx.beforeTraffic, ctx.report);
    pump(upstream, client, ctx.activity, undefined, ctx.report);
    client.resume();
  }

  /**
   * Its peer closed: an error tears `sock` down at once; a clean close ends it (flushing
   * what is queued for it) and gives it `halfCloseGraceMs` to finish, so a peer that never
   * closes its half cannot keep the connection (and the database) alive for ever.
   */
  private release(sock: net.Socket, hard: boolean): void {
    if (sock.destroyed) return;
    if (hard || sock.connecting) {
      sock.destroy();
      return;
    }
    if (!sock.writableEnded) sock.end();
    setTimeout(() => sock.destroy(), this.ctx.halfCloseGraceMs).unref();
  }

  /** Destroys both sockets (front closing). */
  destroy(): void {
    this.client.destroy();
    this.upstream?.destroy();
  }
}

/**
 * Copies `src` to `dst` like `pipe` (with backpressure), plus what pipe cannot do: it
 * stamps the activity clock on every chunk, and when `gate` returns a promise (the
 * database is asleep) it holds that chunk, pausing `src`, until the promise settles. When
 * awake `gate` returns undefined, so a chunk costs a call and a clock read, no allocation.
 */
export function pump(
  src: net.Socket,
  dst: net.Socket,
  activity: Activity,
  gate: (() => Promise<void> | undefined) | undefined,
  report: (err: Error, phase: FrontErrorPhase) => void,
): void {
  let waking = false; // a gate holds src paused
  let blocked = false; // dst's buffer is full
  let endPending = false; // src ended while a held chunk waited
  const resumeIfFree = () => {
    if (!waking && !blocked && !src.destroyed) src.resume();
  };
  const deliver = (chunk: Buffer) => {
    if (!dst.write(chunk)) {
      blocked = true;
      src.pause();
    }
  };
  const hold = (chunk: Buffer, wait: Promise<void>) => {
    waking = true;
    src.pause();
    wait.then(
      () => {
        waking = false;
        if (dst.destroyed || dst.writableEnded) return;
        deliver(chunk);
        if (endPending) dst.end();
        else resumeIfFree();
      },
      (err: unknown) => {
        report(asError(err), 'traffic');
        src.destroy();
        dst.destroy();
      },
    );
  };
  src.on('data', (chunk: Buffer) => {
    activity.at = Date.now();
    let wait: Promise<void> | undefined;
    try {
      wait = gate?.();
    } catch (err) {
      wait = Promise.reject(asError(err));
    }
    if (wait === undefined) deliver(chunk);
    else hold(chunk, wait);
  });
  dst.on('drain', () => {
    blocked = false;
    resumeIfFree();
  });
  // 'end' can come while the last chunk is held (it is emitted once the buffer is empty,
  // flowing or not), so the FIN waits for that chunk.
  src.once('end', () => {
    activity.at = Date.now();
    if (waking) endPending = true;
    else if (!dst.destroyed && !dst.writableEnded) dst.end();
  });
}
