/**
 * A minimal RESP2 client for the platform's control connection over the instance's Unix
 * socket. The engine needs a handful of commands (AUTH, PING, INFO, CONFIG GET, BGSAVE,
 * SAVE, SHUTDOWN), so a small client here keeps a Redis library out of pier's runtime
 * dependencies. Commands are pipelined in order; replies resolve them in order.
 */
import net from 'node:net';

/** A reply: simple or bulk string, integer, nil, or an array of replies. */
export type RespValue = string | number | null | RespValue[];

/** An error reply of the server (`-ERR ...`, `-NOPERM ...`, `-LOADING ...`). */
export class RespError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RespError';
  }
}

/** The connection ended before the reply came (SHUTDOWN ends it on success). */
export class RespClosedError extends Error {
  constructor(message = 'the redis control connection closed') {
    super(message);
    this.name = 'RespClosedError';
  }
}

/** An error reply, kept apart from values while parsing. */
class ErrorReply {
  constructor(readonly message: string) {}
}

type Parsed = { value: RespValue | ErrorReply; next: number } | undefined;

/** Parses one reply at `at`, or undefined when `buf` does not hold all of it yet. */
export function parseReply(buf: Buffer, at: number): Parsed {
  const eol = buf.indexOf('\r\n', at);
  if (eol < 0) return undefined;
  const line = buf.toString('utf8', at + 1, eol);
  const after = eol + 2;
  switch (String.fromCharCode(buf[at] ?? 0)) {
    case '+':
      return { value: line, next: after };
    case '-':
      return { value: new ErrorReply(line), next: after };
    case ':':
      return { value: Number(line), next: after };
    case '$': {
      const len = Number(line);
      if (len < 0) return { value: null, next: after };
      if (buf.length < after + len + 2) return undefined;
      return { value: buf.toString('utf8', after, after + len), next: after + len + 2 };
    }
    case '*': {
      const count = Number(line);
      if (count < 0) return { value: null, next: after };
      const items: RespValue[] = [];
      let next = after;
      for (let i = 0; i < count; i++) {
        const item = parseReply(buf, next);
        if (!item) return undefined;
        // Nested errors are rare (EXEC); they are kept as their text.
        items.push(item.value instanceof ErrorReply ? item.value.message : item.value);
        next = item.next;
      }
      return { value: items, next };
    }
    default:
      throw new Error(
        `unexpected byte in a redis reply: ${JSON.stringify(buf.toString('utf8', at, at + 1))}`,
      );
  }
}

/** The RESP encoding of a command. */
export function encodeCommand(args: string[]): Buffer {
  const parts = [`*${args.length}\r\n`];
  for (const a of args) parts.push(`$${Buffer.byteLength(a)}\r\n${a}\r\n`);
  return Buffer.from(parts.join(''), 'utf8');
}

interface Pending {
  resolve(v: RespValue): void;
  reject(e: Error): void;
  timer: NodeJS.Timeout;
}

/** One control connection. */
export class RespConnection {
  private buf: Buffer = Buffer.alloc(0);
  private readonly pending: Pending[] = [];
  private closedError: Error | undefined;

  private constructor(private readonly socket: net.Socket) {
    socket.on('data', (chunk: Buffer) => this.onData(chunk));
    socket.on('error', (err) => this.fail(err));
    socket.on('close', () => this.fail(new RespClosedError()));
  }

  /** Connects to the Unix socket at `path`; rejects after `timeoutMs`. */
  static connect(path: string, timeoutMs = 2_000): Promise<RespConnection> {
    return new Promise((resolve, reject) => {
      const socket = net.createConnection({ path });
      const timer = setTimeout(() => {
        socket.destroy();
        reject(new Error(`no answer on ${path} within ${timeoutMs} ms`));
      }, timeoutMs);
      socket.once('error', (err) => {
        clearTimeout(timer);
        reject(err);
      });
      socket.once('connect', () => {
        clearTimeout(timer);
        socket.removeAllListeners('error');
        resolve(new RespConnection(socket));
      });
    });
  }

  /** Sends one command; resolves with its reply, rejects with RespError on an error reply. */
  command(args: string[], timeoutMs = 10_000): Promise<RespValue> {
    if (this.closedError) return Promise.reject(this.closedError);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.fail(new Error(`redis ${args[0]} got no reply within ${timeoutMs} ms`));
      }, timeoutMs);
      this.pending.push({ resolve, reject, timer });
      this.socket.write(encodeCommand(args));
    });
  }

  /** Closes the connection; pending commands reject. */
  close(): void {
    this.socket.destroy();
    this.fail(new RespClosedError());
  }

  private onData(chunk: Buffer): void {
    this.buf = this.buf.length === 0 ? chunk : Buffer.concat([this.buf, chunk]);
    let at = 0;
    for (;;) {
      let parsed: Parsed;
      try {
        parsed = parseReply(this.buf, at);
      } catch (err) {
        this.fail(err as Error);
        return;
      }
      if (!parsed) break;
      at = parsed.next;
      const waiter = this.pending.shift();
      if (!waiter) continue;
      clearTimeout(waiter.timer);
      if (parsed.value instanceof ErrorReply) waiter.reject(new RespError(parsed.value.message));
      else waiter.resolve(parsed.value);
    }
    this.buf = this.buf.subarray(at);
  }

  private fail(err: Error): void {
    if (!this.closedError) this.closedError = err;
    this.socket.destroy();
    for (const waiter of this.pending.splice(0)) {
      clearTimeout(waiter.timer);
      waiter.reject(err);
    }
  }
}
