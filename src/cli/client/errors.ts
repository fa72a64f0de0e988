/**
 * The client's failures and how they reach the person: one plain stderr report and exit
 * code 1, instead of a stack trace. Server answers keep their stable `code` so scripts
 * reading stderr can branch on it, as the spec asks clients to (spec 7).
 */

/** One entry of a validation answer's `issues` (spec 7). */
export interface ApiIssue {
  path: string;
  message: string;
}

/** A mistake on the client's side (bad arguments, no key, unreadable file). */
export class CliError extends Error {
  override readonly name = 'CliError';
}

/** The server answered with an error body `{error, code, issues?}`. */
export class ApiCallError extends Error {
  override readonly name = 'ApiCallError';

  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly issues: ApiIssue[] = [],
    /** Seconds from a `Retry-After` header, when the server sent one. */
    readonly retryAfter?: number,
  ) {
    super(message);
  }
}

/** The server could not be reached at all (refused, DNS, TLS, reset). */
export class NetworkError extends Error {
  override readonly name = 'NetworkError';
}

/** The lines printed for a failure this layer knows, or undefined for a foreign one. */
export function describeError(err: unknown): string[] | undefined {
  if (err instanceof ApiCallError) {
    return [
      `pier: ${err.message} (${err.code})`,
      // A 400 whose only issue repeats its sentence (every 400 lists issues) adds no line.
      ...err.issues
        .filter((i) => i.path || i.message !== err.message)
        .map((i) => `  - ${i.path || '(body)'}: ${i.message}`),
    ];
  }
  if (err instanceof CliError || err instanceof NetworkError) return [`pier: ${err.message}`];
  return undefined;
}

/**
 * Wraps a command action so known failures are reported plainly with exit code 1.
 * `process.exitCode` rather than `process.exit` lets pending stdout writes drain.
 * Unknown errors are rethrown to the binary's entry, which reports them the same way.
 */
export function action<A extends unknown[]>(
  fn: (...args: A) => Promise<void>,
): (...args: A) => Promise<void> {
  return async (...args: A) => {
    try {
      await fn(...args);
    } catch (err) {
      const lines = describeError(err);
      if (!lines) throw err;
      for (const line of lines) process.stderr.write(`${line}\n`);
      process.exitCode = 1;
    }
  };
}
