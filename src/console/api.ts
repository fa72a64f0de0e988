/**
 * The console's only way to act: a call of a `/v1` (or `/console/api`) route through the
 * same Fastify app, in process, with the signed-in person's console key as the Bearer.
 * The route's own auth row, validation, audit and errors apply exactly as for the CLI;
 * the console holds no privileged path of its own.
 *
 * The route asked is exactly the URL written, as for a client sending it raw: inject
 * would resolve `.` and `..` segments (`/v1/apps/web/domains/..` becoming
 * `DELETE /v1/apps/web`), and a name from a form or a page's URL may be just that. So the
 * URL also travels in INNER_URL_HEADER, and the app routes by it (http/plugins/inner-calls.ts).
 */
import type { FastifyInstance } from 'fastify';
import type { Readable } from 'node:stream';

/** The URL of an in-process call as written, before inject's URL parser resolves it. */
export const INNER_URL_HEADER = 'x-pier-inner-url';

/** A route's refusal, as its error body says it (`{error, code}`). */
export class Refusal extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly retryAfter?: string,
  ) {
    super(message);
    this.name = 'Refusal';
  }
}

export interface CallOptions {
  body?: unknown;
  query?: Record<string, string | undefined>;
}

export class ConsoleApi {
  constructor(
    private readonly app: FastifyInstance,
    /** The console key (absent before sign-in: only public routes answer). */
    private readonly token: string | undefined,
    /** The browser's address, so per-address limits and audits see the person, not us. */
    private readonly remoteAddress: string,
  ) {}

  /** Calls a route; answers its JSON body, or throws its refusal as a `Refusal`. */
  async call<T = unknown>(method: string, url: string, opts: CallOptions = {}): Promise<T> {
    const res = await this.inject(method, url, opts, false);
    const body: unknown = res.body ? safeJson(res.body) : undefined;
    if (res.statusCode >= 400) throw refusalOf(res.statusCode, body, res.headers);
    return body as T;
  }

  /**
   * Calls a route whose answer is a stream (a build's log followed): answers the body as
   * it comes, or throws the refusal. Destroying the stream lets go of the route's answer.
   */
  async stream(url: string, opts: CallOptions = {}): Promise<Readable> {
    const res = await this.inject('GET', url, opts, true);
    if (res.statusCode >= 400) {
      const chunks: Buffer[] = [];
      for await (const chunk of res.stream()) chunks.push(chunk as Buffer);
      const text = Buffer.concat(chunks).toString('utf8');
      throw refusalOf(res.statusCode, text ? safeJson(text) : undefined, res.headers);
    }
    return res.stream();
  }

  private inject(method: string, url: string, opts: CallOptions, payloadAsStream: boolean) {
    const query = new URLSearchParams(
      Object.entries(opts.query ?? {}).filter((e): e is [string, string] => e[1] !== undefined),
    ).toString();
    const full = query ? `${url}${url.includes('?') ? '&' : '?'}${query}` : url;
    return this.app.inject({
      method: method as 'GET',
      url: full,
      remoteAddress: this.remoteAddress,
      headers: {
        [INNER_URL_HEADER]: full,
        ...(this.token ? { authorization: `Bearer ${this.token}` } : {}),
        ...(opts.body !== undefined ? { 'content-type': 'application/json' } : {}),
      },
      ...(opts.body !== undefined ? { payload: JSON.stringify(opts.body) } : {}),
      payloadAsStream,
    });
  }
}

function refusalOf(status: number, body: unknown, headers: Record<string, unknown>): Refusal {
  const e = (body ?? {}) as { error?: unknown; code?: unknown };
  return new Refusal(
    status,
    typeof e.code === 'string' ? e.code : 'internal',
    typeof e.error === 'string' ? e.error : `The route answered ${status}.`,
    headers['retry-after'] as string | undefined,
  );
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}
