/**
 * Verifies an S3 request's SigV4 signature, header or presigned form, the way S3 does:
 * structure first, then the request time, then the key, then the signature itself, compared
 * in constant time. The body is not read here; the returned `payload` says how to check it.
 */
import { timingSafeEqual } from 'node:crypto';
import {
  UNSIGNED_PAYLOAD,
  canonicalRequest,
  credentialScope,
  formatDatetime,
  headerValue,
  sha256Hex,
  signatureHex,
  signingKey,
  stringToSign,
} from './canonical.js';
import { SigV4Error } from './errors.js';
import {
  authForm,
  parseAuthorizationHeader,
  parsePresignedQuery,
  type ParsedAuth,
} from './parse-auth.js';
import { classifyPayload, payloadAuth } from './payload.js';
import type { SigV4Request, VerifiedAuth } from './types.js';
import { parseQuery } from './uri.js';

/** Options of {@link verifyRequest}. */
export interface VerifyOptions {
  /** The server's current time. */
  now: Date;
  /** The region this endpoint serves; a credential scoped to another is refused. Any if unset. */
  region?: string;
  /** Allowed clock difference in seconds (default 900, S3's 15 minutes). */
  maxSkewS?: number;
}

/** Looks up the secret of an access key; `undefined` when the key is unknown or disabled. */
export type SecretLookup = (accessKeyId: string) => Promise<string | undefined>;

const DEFAULT_MAX_SKEW_S = 900;

/** `20260101T000000Z` → its instant, or undefined when it is not a valid time in that form. */
function parseAmzDate(value: string): Date | undefined {
  const m = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(value);
  if (!m) return undefined;
  const date = new Date(Date.UTC(+m[1]!, +m[2]! - 1, +m[3]!, +m[4]!, +m[5]!, +m[6]!));
  return formatDatetime(date) === value ? date : undefined;
}

/** The request time of either form: the string SigV4 signs and the instant it stands for. */
interface RequestTime {
  datetime: string;
  date: Date;
  /** The header that carried it (header form), which must then be signed. */
  header?: 'x-amz-date' | 'date';
}

function headerRequestTime(req: SigV4Request): RequestTime {
  const amzDate = headerValue(req.headers, 'x-amz-date');
  const missing = () =>
    new SigV4Error('AccessDenied', 'AWS authentication requires a valid Date or x-amz-date header');
  if (amzDate !== undefined) {
    const date = parseAmzDate(amzDate.trim());
    if (!date) throw missing();
    return { datetime: amzDate.trim(), date, header: 'x-amz-date' };
  }
  const httpDate = headerValue(req.headers, 'date');
  const ms = httpDate === undefined ? NaN : Date.parse(httpDate);
  if (Number.isNaN(ms)) throw missing();
  const date = new Date(Math.floor(ms / 1000) * 1000);
  return { datetime: formatDatetime(date), date, header: 'date' };
}

function presignedRequestTime(auth: ParsedAuth): RequestTime {
  const date = parseAmzDate(auth.amzDate ?? '');
  if (!date) {
    throw new SigV4Error(
      'AuthorizationQueryParametersError',
      `X-Amz-Date must be in the ISO8601 Long Format "yyyyMMdd'T'HHmmss'Z'"`,
    );
  }
  return { datetime: auth.amzDate ?? '', date };
}

/** S3 renders times in its error bodies like this: `2026-01-01T00:00:00Z`. */
function isoSeconds(date: Date): string {
  return date.toISOString().replace(/\.\d{3}Z$/, 'Z');
}

function checkTime(auth: ParsedAuth, time: RequestTime, opts: VerifyOptions): void {
  const maxSkewMs = (opts.maxSkewS ?? DEFAULT_MAX_SKEW_S) * 1000;
  const now = opts.now.getTime();
  const requestMs = time.date.getTime();
  if (auth.form === 'header') {
    if (Math.abs(now - requestMs) > maxSkewMs) {
      throw new SigV4Error('RequestTimeTooSkewed', undefined, {
        RequestTime: time.header === 'date' ? isoSeconds(time.date) : time.datetime,
        ServerTime: isoSeconds(opts.now),
        MaxAllowedSkewMilliseconds: String(maxSkewMs),
      });
    }
    return;
  }
  const expiresMs = requestMs + (auth.expiresS ?? 0) * 1000;
  if (now > expiresMs) {
    throw new SigV4Error('AccessDenied', 'Request has expired', {
      'X-Amz-Expires': String(auth.expiresS),
      Expires: isoSeconds(new Date(expiresMs)),
      ServerTime: isoSeconds(opts.now),
    });
  }
  // A URL dated ahead of the server's clock by more than the skew was not minted by a client
  // whose clock is merely off; it could be used to outlive its own expiry.
  if (requestMs - now > maxSkewMs) {
    throw new SigV4Error('AccessDenied', 'Request is not valid yet', {
      'X-Amz-Date': time.datetime,
      ServerTime: isoSeconds(opts.now),
    });
  }
}

function checkScope(auth: ParsedAuth, time: RequestTime, opts: VerifyOptions): void {
  const code =
    auth.form === 'header' ? 'AuthorizationHeaderMalformed' : 'AuthorizationQueryParametersError';
  const prefix =
    auth.form === 'header'
      ? 'The authorization header is malformed'
      : 'Error parsing the X-Amz-Credential parameter';
  if (opts.region !== undefined && auth.region !== opts.region) {
    throw new SigV4Error(
      code,
      `${prefix}; the region '${auth.region}' is wrong; expecting '${opts.region}'`,
      { Region: opts.region },
    );
  }
  if (auth.scopeDate !== time.datetime.slice(0, 8)) {
    const which = auth.form === 'header' && time.header === 'date' ? 'Date' : 'X-Amz-Date';
    throw new SigV4Error(
      code,
      `${prefix}; Invalid credential date "${auth.scopeDate}". This date is not the same as ${which}: "${time.datetime.slice(0, 8)}".`,
    );
  }
}

/**
 * Every `x-amz-*` header sent must be signed, or it could be added or altered in flight
 * (think `x-amz-copy-source` or `x-amz-acl` on a presigned URL). A presigned request may send
 * `x-amz-content-sha256` unsigned: its value is the payload line of the canonical request, so
 * the signature covers it anyway. The header form must sign it and its date header too.
 */
function checkSignedHeaders(req: SigV4Request, auth: ParsedAuth, time: RequestTime): void {
  const signed = new Set(auth.signedHeaders);
  const notSigned = Object.keys(req.headers)
    .filter((name) => req.headers[name] !== undefined)
    .map((name) => name.toLowerCase())
    .filter((name) => name.startsWith('x-amz-') && !signed.has(name))
    .filter((name) => auth.form === 'header' || name !== 'x-amz-content-sha256');
  if (auth.form === 'header') {
    if (time.header && !signed.has(time.header)) notSigned.push(time.header);
    if (!signed.has('x-amz-content-sha256') && !notSigned.includes('x-amz-content-sha256')) {
      notSigned.push('x-amz-content-sha256');
    }
  }
  if (notSigned.length > 0) {
    throw new SigV4Error(
      'AccessDenied',
      'There were headers present in the request which were not signed',
      { HeadersNotSigned: [...new Set(notSigned)].sort().join(', ') },
    );
  }
}

/** The canonical request's payload line. */
function payloadLine(req: SigV4Request, auth: ParsedAuth): string {
  const header = headerValue(req.headers, 'x-amz-content-sha256');
  if (auth.form === 'header') {
    if (header === undefined) {
      throw new SigV4Error(
        'InvalidRequest',
        'Missing required header for this request: x-amz-content-sha256',
      );
    }
    return header;
  }
  // SDK v3 presigned URLs repeat the payload line as a query parameter; it is signed there.
  const param = parseQuery(req.query).find(
    ([name]) => name.toLowerCase() === 'x-amz-content-sha256',
  )?.[1];
  return header ?? param ?? UNSIGNED_PAYLOAD;
}

/** Constant-time comparison of two hex signatures. */
function sameSignature(expected: string, provided: string): boolean {
  const a = Buffer.from(expected, 'latin1');
  const b = Buffer.from(provided, 'latin1');
  return a.length === b.length && timingSafeEqual(a, b);
}

/**
 * Verifies the SigV4 signature of an S3 request, in the `Authorization` header form or the
 * presigned query form, against the secret `lookupSecret` returns for its access key.
 *
 * Canonicalizes from the raw, still-encoded path and query exactly as S3 does (no double
 * encoding; `+` read as a space), enforces the clock skew window (header form) or the expiry
 * (presigned), and requires every `x-amz-*` header sent to be signed.
 *
 * @returns who signed and how the body must be checked (see {@link VerifiedAuth.payload}).
 * @throws {SigV4Error} with S3's code: `AccessDenied`, `SignatureDoesNotMatch`,
 *   `InvalidAccessKeyId`, `RequestTimeTooSkewed`, `AuthorizationHeaderMalformed`,
 *   `AuthorizationQueryParametersError`, `InvalidArgument`, `InvalidRequest`, `InvalidURI`.
 */
export async function verifyRequest(
  req: SigV4Request,
  lookupSecret: SecretLookup,
  opts: VerifyOptions,
): Promise<VerifiedAuth> {
  const form = authForm(req);
  if (form === 'anonymous') throw new SigV4Error('AccessDenied');
  const auth =
    form === 'header'
      ? parseAuthorizationHeader(headerValue(req.headers, 'authorization') ?? '')
      : parsePresignedQuery(req.query);
  const time = form === 'header' ? headerRequestTime(req) : presignedRequestTime(auth);
  checkScope(auth, time, opts);
  checkTime(auth, time, opts);
  const payloadHash = payloadLine(req, auth);
  classifyPayload(payloadHash);
  checkSignedHeaders(req, auth, time);

  const secret = await lookupSecret(auth.accessKeyId);
  if (secret === undefined) {
    throw new SigV4Error('InvalidAccessKeyId', undefined, { AWSAccessKeyId: auth.accessKeyId });
  }

  const canonical = canonicalRequest({
    method: req.method,
    rawPath: req.rawPath,
    query: req.query,
    headers: req.headers,
    signedHeaders: auth.signedHeaders,
    payloadHash,
    presigned: form === 'query',
  });
  const scope = credentialScope(auth.scopeDate, auth.region);
  const toSign = stringToSign(time.datetime, scope, sha256Hex(canonical));
  const key = signingKey(secret, auth.scopeDate, auth.region);
  if (!sameSignature(signatureHex(key, toSign), auth.signature)) {
    throw new SigV4Error('SignatureDoesNotMatch', undefined, {
      AWSAccessKeyId: auth.accessKeyId,
      StringToSign: toSign,
      SignatureProvided: auth.signature,
      CanonicalRequest: canonical,
    });
  }

  return {
    accessKeyId: auth.accessKeyId,
    region: auth.region,
    signedHeaders: auth.signedHeaders,
    payload: payloadAuth(payloadHash, {
      seedSignature: auth.signature,
      signingKey: key,
      datetime: time.datetime,
      scope,
    }),
    form,
  };
}
