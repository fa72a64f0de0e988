/**
 * The console's only way to act: a call of a `/v1` (or `/console/api`) route through the
 * same Fastify app, in process, with the signed-in person's console key as the Bearer.
 * The route's own auth row, validation, audit and errors apply exactly as for the CLI;
 * the console holds no privileged path of its own.
 */
import type { FastifyInstance } from 'fastify';

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
    const query = Object.fromEntries(
      Object.entries(opts.query ?? {}).filter((e): e is [string, string] => e[1] !== undefined),
    );
    const res = await this.app.inject({
      method: method as 'GET',
      url,
      query,
      remoteAddress: this.remoteAddress,
      headers: {
        ...(this.token ? { authorization: `Bearer ${this.token}` } : {}),
        ...(opts.body !== undefined ? { 'content-type': 'application/json' } : {}),
      },
      ...(opts.body !== undefined ? { payload: JSON.stringify(opts.body) } : {}),
    });
    const body: unknown = res.body ? safeJson(res.body) : undefined;
    if (res.statusCode >= 400) {
      const e = (body ?? {}) as { error?: unknown; code?: unknown };
      throw new Refusal(
        res.statusCode,
        typeof e.code === 'string' ? e.code : 'internal',
        typeof e.error === 'string' ? e.error : `The route answered ${res.statusCode}.`,
        res.headers['retry-after'] as string | undefined,
      );
    }
    return body as T;
  }
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}
