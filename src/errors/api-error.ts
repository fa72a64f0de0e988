/**
 * The one error type services throw. It carries a catalogue code; the HTTP layer renders
 * it as `{error, code, ...extra}` with the catalogue's status. Services never speak HTTP.
 */
import { errorCatalogue, type ErrorCode } from './catalogue.js';

export interface ValidationIssue {
  path: string;
  message: string;
}

/** Extra fields the spec allows on an error body (part 7). */
export interface ErrorExtra {
  issues?: ValidationIssue[];
  limit?: number | null;
  current?: number;
  heldBy?: string;
  until?: string;
  leaseId?: string;
  [key: string]: unknown;
}

export class ApiError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly extra: ErrorExtra;
  /** Seconds for a `Retry-After` header, where the code asks the client to come back. */
  readonly retryAfter: number | undefined;

  constructor(code: ErrorCode, message?: string, extra: ErrorExtra = {}, retryAfter?: number) {
    super(message ?? errorCatalogue[code].message);
    this.name = 'ApiError';
    this.code = code;
    this.status = errorCatalogue[code].status;
    this.extra = extra;
    this.retryAfter = retryAfter;
  }

  toBody(): Record<string, unknown> {
    return { error: this.message, code: this.code, ...this.extra };
  }
}

/** A 400 that names every wrong field in its sentence and lists them in `issues`. */
export function badRequest(issues: ValidationIssue[]): ApiError {
  const named = issues.filter((i) => i.path !== '');
  const whole = issues.filter((i) => i.path === '').map((i) => i.message);
  const fields = [...new Set(named.map((i) => i.path))];
  const parts: string[] = [];
  if (whole.length) parts.push(`The request is invalid: ${whole.join('; ')}.`);
  if (fields.length) {
    const detail = named.map((i) => `${i.path}: ${i.message}`).join('; ');
    parts.push(`Invalid ${fields.join(', ')} (${detail}).`);
  }
  return new ApiError('bad-request', parts.join(' '), { issues });
}

export function notFound(what: string): ApiError {
  return new ApiError('not-found', `${what} not found.`);
}
