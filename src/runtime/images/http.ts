/**
 * The HTTP transport of the registry client: where we may connect, how redirects are
 * followed, and how slow or dead peers turn into ImageError('unreachable').
 *
 * Rules:
 * - Every request, and every redirect hop, goes through the outbound guard
 *   (host/outbound-guard.ts, given to the ImageStore by the platform): it resolves the
 *   host, refuses loopback, private, link-local and metadata addresses unless the operator
 *   allows them (PIER_ALLOW_PRIVATE_TARGETS=1) or trusts the registry
 *   (PIER_TRUSTED_REGISTRIES), and connects to the addresses it checked. A refusal is
 *   ImageError('refused'). This covers the registry, its token realm and blob redirects.
 * - Plain HTTP only to loopback hosts (a local registry in tests or on the host itself);
 *   everything else is HTTPS.
 * - Redirects are followed by hand (at most 5) and only to the same scheme: registries
 *   legitimately send blob downloads to a CDN host, but never from HTTPS to HTTP or to
 *   any other scheme. The Authorization header is dropped as soon as the host changes,
 *   so a registry token never reaches the CDN.
 * - A request times out when the peer is silent for `timeoutMs`: before the headers, and
 *   between two chunks of the body (an idle timer, not a total deadline, so a large layer
 *   on a slow but live connection still finishes). The caller's AbortSignal aborts at once
 *   and its reason is rethrown as is: giving up is not an image error.
 */
import { OutboundRefused } from '../../host/outbound-guard.js';
import { ImageError } from './errors.js';

const MAX_REDIRECTS = 5;

/** True for hosts (with or without port) on this machine's loopback. */
export function isLoopbackHost(host: string): boolean {
  const name = host.startsWith('[') ? host.slice(0, host.indexOf(']') + 1) : host.split(':')[0]!;
  return name === 'localhost' || name === '[::1]' || /^127(?:\.\d{1,3}){3}$/.test(name);
}

/** The scheme to use for a host: http only for loopback. */
export function schemeFor(host: string): 'http:' | 'https:' {
  return isLoopbackHost(host) ? 'http:' : 'https:';
}

/** Checks that we may connect to `url` at all (scheme and loopback rule). */
export function assertAllowedUrl(url: URL, what: string): void {
  if (url.protocol === 'https:') return;
  if (url.protocol === 'http:' && isLoopbackHost(url.host)) return;
  throw new ImageError(
    'unsupported',
    `${what} ${url.protocol}//${url.host} is not allowed: only HTTPS, or plain HTTP to this machine's loopback.`,
  );
}

/** Restarts a countdown on every sign of life; fires `onIdle` when there is none for `ms`. */
export class IdleTimer {
  private timer: NodeJS.Timeout | undefined;
  constructor(
    private readonly ms: number,
    private readonly onIdle: () => void,
  ) {
    this.touch();
  }
  touch(): void {
    this.clear();
    this.timer = setTimeout(this.onIdle, this.ms);
    this.timer.unref?.();
  }
  clear(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }
}

/**
 * How the transport sends one request (no redirects followed): the guard's fetch in
 * production (`OutboundGuard.fetch`); the global fetch fits too, for tests that fail on
 * purpose before any connection.
 */
export type FetchLike = (
  url: URL,
  init: {
    method: string;
    headers: Record<string, string>;
    redirect: 'manual';
    signal: AbortSignal;
  },
) => Promise<Response>;

/** What the transport needs from its owner. */
export interface TransportOptions {
  fetch: FetchLike;
  timeoutMs: number;
  signal?: AbortSignal;
}

/** An answered request: the response and the idle timer guarding its body. */
export interface Answer {
  response: Response;
  /** Call on each body chunk; call `done()` when the body is consumed or abandoned. */
  idle: IdleTimer;
  done(): void;
  /** The URL that finally answered (after redirects). */
  url: URL;
  /** Maps an error met while reading the body, like {@link translate}. */
  fail(err: unknown): unknown;
}

class TimedOut extends Error {}

/**
 * Sends one request, following allowed redirects. Network failures and silence become
 * ImageError('unreachable'); the caller's abort is rethrown as its reason. The caller
 * reads (or cancels) the body and then calls `done()`.
 */
export async function send(
  start: URL,
  init: { method: string; headers: Record<string, string> },
  opts: TransportOptions,
): Promise<Answer> {
  const controller = new AbortController();
  const idle = new IdleTimer(opts.timeoutMs, () => controller.abort(new TimedOut()));
  const signal = opts.signal
    ? AbortSignal.any([opts.signal, controller.signal])
    : controller.signal;
  const done = () => idle.clear();
  let url = start;
  let headers = { ...init.headers };
  try {
    assertAllowedUrl(url, 'the address');
    for (let hop = 0; ; hop++) {
      const response = await opts.fetch(url, {
        method: init.method,
        headers,
        redirect: 'manual',
        signal,
      });
      const location = response.headers.get('location');
      if (response.status < 300 || response.status > 399 || !location) {
        idle.touch();
        const answered = url;
        const fail = (err: unknown) => translate(err, answered, opts.signal, controller.signal);
        return { response, idle, done, url, fail };
      }
      await response.body?.cancel().catch(() => undefined);
      if (hop >= MAX_REDIRECTS) {
        throw new ImageError(
          'unreachable',
          `${start.host} redirected more than ${MAX_REDIRECTS} times.`,
        );
      }
      const next = new URL(location, url);
      if (next.protocol !== start.protocol) {
        throw new ImageError(
          'unsupported',
          `${start.host} redirected to a ${next.protocol} address, which is refused: redirects must keep the ${start.protocol} scheme.`,
        );
      }
      assertAllowedUrl(next, 'the redirect target');
      if (next.host !== url.host) {
        headers = Object.fromEntries(
          Object.entries(headers).filter(([k]) => k.toLowerCase() !== 'authorization'),
        );
      }
      url = next;
      idle.touch();
    }
  } catch (err) {
    done();
    throw translate(err, url, opts.signal, controller.signal);
  }
}

/** Maps what fetch threw (or a body read threw) to what callers of the client should see. */
export function translate(
  err: unknown,
  url: URL,
  callerSignal: AbortSignal | undefined,
  ownSignal?: AbortSignal,
): unknown {
  if (err instanceof ImageError) return err;
  if (callerSignal?.aborted) return callerSignal.reason;
  if (err instanceof OutboundRefused) return new ImageError('refused', err.message, { cause: err });
  if (ownSignal?.aborted && ownSignal.reason instanceof TimedOut) {
    return new ImageError('unreachable', `${url.host} did not answer in time.`, { cause: err });
  }
  const cause = (err as { cause?: { code?: string; message?: string } } | undefined)?.cause;
  const why = cause?.code ?? cause?.message ?? (err as Error | undefined)?.message ?? String(err);
  return new ImageError('unreachable', `Cannot reach ${url.host}: ${why}.`, { cause: err });
}

/**
 * Reads a whole (small) body, at most `limit` bytes, touching the idle timer as bytes come.
 * Larger bodies are refused: manifests and configs are small, and a peer that streams
 * without end must not fill our memory.
 */
export async function readLimited(answer: Answer, limit: number, what: string): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  const body = answer.response.body;
  try {
    if (!body) return Buffer.alloc(0);
    for await (const chunk of body) {
      answer.idle.touch();
      size += chunk.byteLength;
      if (size > limit) {
        await body.cancel().catch(() => undefined);
        throw new ImageError('unsupported', `${what} is larger than ${limit} bytes.`);
      }
      chunks.push(Buffer.from(chunk));
    }
    return Buffer.concat(chunks);
  } catch (err) {
    throw answer.fail(err);
  } finally {
    answer.done();
  }
}
