/**
 * A small fetch-based client for the pier API (spec 1, 5, 7): JSON in and out, the key as
 * a Bearer, and every error answer turned into an `ApiCallError` carrying its `code`.
 */
import { ApiCallError, type ApiIssue, NetworkError } from './errors.js';

/** One raw answer: status, headers and the parsed JSON body (or the text, or undefined). */
export interface ApiAnswer {
  status: number;
  headers: Headers;
  body: unknown;
}

/** A connection to one pier API: its base address and, for most routes, a key. */
export class ApiClient {
  constructor(
    readonly baseUrl: string,
    private readonly apiKey?: string,
  ) {}

  /** Sends one request and answers whatever came back, error statuses included. */
  async send(method: string, path: string, body?: unknown): Promise<ApiAnswer> {
    const headers: Record<string, string> = { accept: 'application/json' };
    if (this.apiKey) headers.authorization = `Bearer ${this.apiKey}`;
    if (body !== undefined) headers['content-type'] = 'application/json';
    let res: Response;
    try {
      res = await fetch(`${this.baseUrl}${path}`, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch (err) {
      throw new NetworkError(`cannot reach ${this.baseUrl}: ${reasonOf(err)}`);
    }
    const text = await res.text();
    let parsed: unknown = text === '' ? undefined : text;
    try {
      if (text !== '') parsed = JSON.parse(text);
    } catch {
      // Not JSON (a proxy's HTML page, say): keep the text for the error message.
    }
    return { status: res.status, headers: res.headers, body: parsed };
  }

  /** Sends one request; answers the body on 2xx, throws `ApiCallError` otherwise. */
  async call<T>(method: string, path: string, body?: unknown): Promise<T> {
    const answer = await this.send(method, path, body);
    if (answer.status >= 200 && answer.status < 300) return answer.body as T;
    throw toApiCallError(answer);
  }
}

/** Builds a path from literal parts and encoded parameters: path`/v1/apps/${name}`. */
export function apiPath(strings: TemplateStringsArray, ...params: string[]): string {
  return strings.reduce(
    (acc, s, i) => acc + s + (i < params.length ? encodeURIComponent(params[i] ?? '') : ''),
    '',
  );
}

/** An error answer of a raw request (not through `ApiClient`) as an `ApiCallError`. */
export async function errorOfResponse(res: Response): Promise<ApiCallError> {
  const text = await res.text().catch(() => '');
  let body: unknown = text === '' ? undefined : text;
  try {
    if (text !== '') body = JSON.parse(text);
  } catch {
    // Not JSON: the text goes into the message.
  }
  return toApiCallError({ status: res.status, headers: res.headers, body });
}

/**
 * fetch for requests the JSON client cannot make (streamed bodies and answers), with a
 * refused or broken connection reported as the client reports it.
 */
export async function rawFetch(
  baseUrl: string,
  url: string,
  init: RequestInit & { duplex?: 'half' },
): Promise<Response> {
  try {
    return await fetch(url, init);
  } catch (err) {
    throw new NetworkError(`cannot reach ${baseUrl}: ${reasonOf(err)}`);
  }
}

/** Turns an error answer into an `ApiCallError`, tolerating bodies that are not ours. */
export function toApiCallError(answer: ApiAnswer): ApiCallError {
  const retryAfter = parseRetryAfter(answer.headers.get('retry-after'));
  const b = answer.body;
  if (isRecord(b) && typeof b.error === 'string' && typeof b.code === 'string') {
    const issues = Array.isArray(b.issues) ? b.issues.filter(isIssue) : [];
    return new ApiCallError(answer.status, b.code, b.error, issues, retryAfter);
  }
  // Spec 7: an unknown or missing code falls back on the HTTP status.
  const snippet = typeof b === 'string' && b.trim() ? `: ${b.trim().slice(0, 200)}` : '';
  return new ApiCallError(
    answer.status,
    `http-${answer.status}`,
    `the server answered HTTP ${answer.status}${snippet}`,
    [],
    retryAfter,
  );
}

/** `Retry-After` in seconds, from either form the header may take (seconds or a date). */
export function parseRetryAfter(value: string | null): number | undefined {
  if (value === null || value.trim() === '') return undefined;
  if (/^\d+$/.test(value.trim())) return Number(value.trim());
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, Math.ceil((at - Date.now()) / 1000));
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function isIssue(v: unknown): v is ApiIssue {
  return isRecord(v) && typeof v.path === 'string' && typeof v.message === 'string';
}

/** fetch hides the useful part (ECONNREFUSED, ENOTFOUND) in `cause`. */
function reasonOf(err: unknown): string {
  const cause = (err as { cause?: unknown }).cause;
  if (isRecord(cause)) {
    if (typeof cause.code === 'string') return cause.code;
    if (typeof cause.message === 'string') return cause.message;
  }
  return err instanceof Error ? err.message : String(err);
}
