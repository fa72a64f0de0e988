/**
 * The SigV4 canonical request, string to sign and signing key, built the way S3 builds them on
 * its side. Everything here is pure; the verifier and the presigner share it so they cannot
 * drift apart.
 */
import { createHash, createHmac } from 'node:crypto';
import { canonicalQuery, canonicalUri } from './uri.js';
import type { HeaderBag } from './types.js';

/** The only algorithm S3 accepts for HMAC SigV4. */
export const ALGORITHM = 'AWS4-HMAC-SHA256';
/** The service name in an S3 credential scope. */
export const SERVICE = 's3';
/** The terminal element of a credential scope. */
export const TERMINATOR = 'aws4_request';
/** `x-amz-content-sha256` value for a body the signature does not cover. */
export const UNSIGNED_PAYLOAD = 'UNSIGNED-PAYLOAD';
/** SHA-256 of the empty string, hex. */
export const EMPTY_SHA256 = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855';

/** Lowercase hex SHA-256 of a string (UTF-8) or bytes. */
export function sha256Hex(data: string | Uint8Array): string {
  return createHash('sha256').update(data).digest('hex');
}

/** HMAC-SHA256 of a UTF-8 string under `key`. */
export function hmac(key: Uint8Array | string, data: string): Buffer {
  return createHmac('sha256', key).update(data, 'utf8').digest();
}

/** `20260101T000000Z`: ISO 8601 basic format, whole seconds, UTC, as SigV4 writes times. */
export function formatDatetime(date: Date): string {
  return date
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d{3}/, '');
}

/** `20260101/us-east-1/s3/aws4_request`. */
export function credentialScope(date: string, region: string): string {
  return `${date}/${region}/${SERVICE}/${TERMINATOR}`;
}

/** A header's value as one string; Node gives repeated headers as arrays, SigV4 joins with `,`. */
export function headerValue(headers: HeaderBag, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value.join(',') : value;
}

/**
 * The canonical headers block: one `name:value\n` line per signed header, in the order given
 * (clients list them sorted), values trimmed with inner whitespace runs collapsed to one space.
 * A signed header the request lacks canonicalizes as empty, so the signature simply fails.
 */
export function canonicalHeaders(headers: HeaderBag, signedHeaders: readonly string[]): string {
  return signedHeaders
    .map((name) => {
      const value = headerValue(headers, name) ?? '';
      return `${name}:${value.trim().replace(/\s+/g, ' ')}\n`;
    })
    .join('');
}

/** Everything that goes into a canonical request. */
export interface CanonicalRequestInput {
  /** The request method as sent, e.g. `PUT`. */
  method: string;
  /** The path from the request line, still percent-encoded. */
  rawPath: string;
  /** The raw query string, without `?`. */
  query: string;
  /** The request headers (lowercased names). */
  headers: HeaderBag;
  /** The signed header names, as listed by the client. */
  signedHeaders: readonly string[];
  /** The payload line: a hex SHA-256, `UNSIGNED-PAYLOAD` or a `STREAMING-…` token. */
  payloadHash: string;
  /** True for presigned requests, whose `X-Amz-Signature` parameter is left out. */
  presigned?: boolean;
}

/**
 * The canonical request S3 computes:
 * `METHOD\nURI\nQUERY\nHEADERS\n\nSIGNED;HEADERS\nPAYLOAD`.
 */
export function canonicalRequest(input: CanonicalRequestInput): string {
  return [
    input.method,
    canonicalUri(input.rawPath),
    canonicalQuery(input.query, input.presigned ? ['X-Amz-Signature'] : []),
    canonicalHeaders(input.headers, input.signedHeaders),
    input.signedHeaders.join(';'),
    input.payloadHash,
  ].join('\n');
}

/** `AWS4-HMAC-SHA256\n<datetime>\n<scope>\n<hex sha256 of the canonical request>`. */
export function stringToSign(
  datetime: string,
  scope: string,
  canonicalRequestHash: string,
): string {
  return `${ALGORITHM}\n${datetime}\n${scope}\n${canonicalRequestHash}`;
}

// Derived keys change once a day per secret and region, and every request of a busy client
// needs one: four HMACs saved per request. The cache is bounded and evicts the oldest entry.
const MAX_CACHED_KEYS = 1024;
const keyCache = new Map<string, Buffer>();

/**
 * The SigV4 signing key
 * `HMAC(HMAC(HMAC(HMAC("AWS4" + secret, date), region), "s3"), "aws4_request")`,
 * cached per (secret, date, region). `date` is `YYYYMMDD`.
 */
export function signingKey(secret: string, date: string, region: string): Buffer {
  // The cache is keyed by a digest so secrets are not kept around as map keys.
  const cacheKey = sha256Hex(`${secret}\0${date}\0${region}`);
  const cached = keyCache.get(cacheKey);
  if (cached) return cached;
  const key = hmac(hmac(hmac(hmac(`AWS4${secret}`, date), region), SERVICE), TERMINATOR);
  if (keyCache.size >= MAX_CACHED_KEYS) {
    const oldest = keyCache.keys().next();
    if (!oldest.done) keyCache.delete(oldest.value);
  }
  keyCache.set(cacheKey, key);
  return key;
}

/** The hex signature of a string to sign. */
export function signatureHex(key: Uint8Array, toSign: string): string {
  return hmac(key, toSign).toString('hex');
}
