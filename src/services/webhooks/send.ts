/**
 * One delivery attempt: a signed POST through the outbound guard, which resolves the
 * endpoint's name now and connects only to the addresses it judged (a name that turned
 * to a private address since the webhook was created is refused here: DNS rebinding).
 * The whole attempt (resolve, connect, answer, a short prefix of the body) runs under one
 * timeout, and no more than RESPONSE_PREFIX_BYTES of the answer is read: a slow or huge
 * answer costs a worker slot for at most the timeout. Redirects are not followed (an
 * endpoint that moved answers 3xx, which counts as a failure).
 */
import { OutboundRefused, type OutboundGuard } from '../../host/outbound-guard.js';
import { parseRetryAfter } from './schedule.js';
import { signedHeaders } from './signature.js';

/** How much of an answer is read (and then dropped): enough to end a small one cleanly. */
export const RESPONSE_PREFIX_BYTES = 1024;

export interface AttemptResult {
  ok: boolean;
  status?: number;
  error?: string;
  durationMs: number;
  /** From `Retry-After`, in ms from the end of the attempt. */
  retryAfterMs?: number;
}

export interface AttemptInput {
  url: string;
  secret: string;
  /** `webhook-id`: the event's id, the same on every try. */
  messageId: string;
  body: string;
  timeoutMs: number;
  /** Aborts the attempt early (the replica is stopping). */
  signal?: AbortSignal;
}

export async function attemptDelivery(
  guard: OutboundGuard,
  input: AttemptInput,
): Promise<AttemptResult> {
  const started = performance.now();
  const timeout = AbortSignal.timeout(input.timeoutMs);
  const signal = input.signal ? AbortSignal.any([timeout, input.signal]) : timeout;
  const done = (r: Omit<AttemptResult, 'durationMs'>): AttemptResult => ({
    ...r,
    durationMs: Math.round(performance.now() - started),
  });
  try {
    const timestamp = Math.floor(Date.now() / 1000);
    const response = await guard.fetch(input.url, {
      method: 'POST',
      redirect: 'manual',
      signal,
      headers: {
        'content-type': 'application/json',
        'user-agent': 'pier-webhooks/1',
        ...signedHeaders(input.secret, input.messageId, timestamp, input.body),
      },
      body: input.body,
    });
    // The status decides; a body that stalls or breaks after it changes nothing.
    await readPrefix(response, RESPONSE_PREFIX_BYTES).catch(() => undefined);
    const ok = response.status >= 200 && response.status < 300;
    return done({
      ok,
      status: response.status,
      ...(ok ? {} : { error: `the endpoint answered ${response.status}` }),
      ...retryAfterOf(response),
    });
  } catch (err) {
    return done({ ok: false, error: describe(err, timeout.aborted, input.timeoutMs) });
  }
}

function retryAfterOf(response: Response): { retryAfterMs?: number } {
  const ms = parseRetryAfter(response.headers.get('retry-after'), Date.now());
  return ms === undefined ? {} : { retryAfterMs: ms };
}

/** Reads at most `max` bytes of the body, then drops the rest (and the connection). */
async function readPrefix(response: Response, max: number): Promise<void> {
  const reader = response.body?.getReader();
  if (!reader) return;
  let read = 0;
  try {
    while (read < max) {
      const { done, value } = await reader.read();
      if (done) return;
      read += value.byteLength;
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
}

function describe(err: unknown, timedOut: boolean, timeoutMs: number): string {
  if (timedOut) return `no answer within ${timeoutMs} ms`;
  if (err instanceof OutboundRefused) return err.message;
  const cause = (err as { cause?: { code?: string; message?: string } })?.cause;
  if (cause?.code) return `connection failed: ${cause.code}`;
  return `connection failed: ${(err as Error)?.message ?? String(err)}`;
}
