/**
 * The in-process request an MCP tool makes to its route: handed to Fastify's own router
 * (`app.routing`), so routing, every hook of the route (auth row, agent judge and audit,
 * credit block), validation, the handler, serialization, `onSend` and `onResponse` run
 * as for any request, on a minimal request/response pair.
 *
 * It replaces `app.inject`, whose emulation of a client (light-my-request: a full
 * `ServerResponse` over a null socket whose head is written out and parsed back, URL and
 * header normalisation, option validation) cost about as much as the route's own work.
 * The pair here keeps what Fastify and pier's hooks read: method, url, headers, a
 * loopback socket address, the body as a stream, the response as a `Writable` with its
 * status and headers, and `close` on both once the answer is complete.
 */
import type { FastifyInstance } from 'fastify';
import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import { EventEmitter } from 'node:events';
import { Readable, Writable } from 'node:stream';

export interface InnerAnswer {
  statusCode: number;
  body: string;
}

/** The address Fastify reports as the client's (`req.ip`): this process, as with inject. */
class LoopbackSocket extends EventEmitter {
  readonly remoteAddress = '127.0.0.1';
  readonly remoteFamily = 'IPv4';
  readonly remotePort = 0;
  readonly localAddress = '127.0.0.1';
  readonly encrypted = false;
  readonly destroyed = false;
  setTimeout(): this {
    return this;
  }
}

class InnerRequest extends Readable {
  readonly httpVersion = '1.1';
  readonly httpVersionMajor = 1;
  readonly httpVersionMinor = 1;
  readonly aborted = false;
  readonly socket = new LoopbackSocket();
  constructor(
    readonly method: string,
    readonly url: string,
    readonly headers: Record<string, string>,
    private payload: Buffer | undefined,
  ) {
    // Closed only once the answer is complete (innerRequest), as a client's would be:
    // not as soon as the body has been read.
    super({ autoDestroy: false });
  }
  override _read(): void {
    if (this.payload) this.push(this.payload);
    this.payload = undefined;
    this.push(null);
  }
}

class InnerResponse extends Writable {
  statusCode = 200;
  statusMessage = '';
  headersSent = false;
  private readonly heads = new Map<string, number | string | string[]>();
  private readonly chunks: Buffer[] = [];

  setHeader(name: string, value: number | string | readonly string[]): this {
    this.heads.set(name.toLowerCase(), typeof value === 'object' ? [...value] : value);
    return this;
  }
  getHeader(name: string) {
    return this.heads.get(name.toLowerCase());
  }
  hasHeader(name: string): boolean {
    return this.heads.has(name.toLowerCase());
  }
  removeHeader(name: string): void {
    this.heads.delete(name.toLowerCase());
  }
  getHeaders(): OutgoingHttpHeaders {
    return Object.fromEntries(this.heads);
  }
  getHeaderNames(): string[] {
    return [...this.heads.keys()];
  }
  writeHead(status: number, ...rest: unknown[]): this {
    this.statusCode = status;
    const headers = rest.find((arg) => typeof arg === 'object') as OutgoingHttpHeaders | undefined;
    for (const [name, value] of Object.entries(headers ?? {})) {
      if (value !== undefined) this.setHeader(name, value);
    }
    this.headersSent = true;
    return this;
  }
  flushHeaders(): void {
    this.headersSent = true;
  }
  addTrailers(): void {}
  override _write(chunk: Buffer, _encoding: BufferEncoding, done: () => void): void {
    this.headersSent = true;
    this.chunks.push(chunk);
    done();
  }
  text(): string {
    return Buffer.concat(this.chunks).toString('utf8');
  }
}

/** Sends one request through `app`'s router and answers its status and body. */
export function innerRequest(
  app: FastifyInstance,
  method: string,
  url: string,
  headers: Record<string, string>,
  payload?: string | Buffer,
): Promise<InnerAnswer> {
  const body = payload === undefined ? undefined : Buffer.from(payload);
  // The host inject gave these requests: no app's name, so the app proxy passes them on.
  headers.host = 'localhost:80';
  if (body) headers['content-length'] = String(body.length);
  const req = new InnerRequest(method, url, headers, body);
  const res = new InnerResponse();
  return new Promise((resolve, reject) => {
    res.once('finish', () => {
      resolve({ statusCode: res.statusCode, body: res.text() });
      // What waits on the request's end (a principal's revocation tracking) lets go.
      req.destroy();
      res.destroy();
    });
    res.once('error', reject);
    res.once('close', () => {
      if (!res.writableFinished)
        reject(new Error('the route closed its answer before completing it'));
    });
    app.routing(req as unknown as IncomingMessage, res as unknown as ServerResponse);
  });
}
