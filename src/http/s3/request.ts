/**
 * What a gateway request addresses, read from the raw request line: the bucket, the key
 * (decoded exactly as the signature check decodes it) and the query parameters.
 */
import type { FastifyRequest } from 'fastify';
import { unstorableText } from '../../contracts/common.js';
import { ObjectError } from '../../services/buckets/object-error.js';
import { decodePath, parseQuery } from '../../objects/sigv4/uri.js';

export const GATEWAY_PREFIX = '/s3';

export interface S3Target {
  rawPath: string;
  rawQuery: string;
  bucket?: string;
  key?: string;
  query: Map<string, string>;
  /** Resource name for error bodies, e.g. `/bucket/key`. */
  resource: string;
}

export function targetOf(req: FastifyRequest): S3Target {
  const url = req.raw.url ?? '/';
  const q = url.indexOf('?');
  const rawPath = q < 0 ? url : url.slice(0, q);
  const rawQuery = q < 0 ? '' : url.slice(q + 1);
  const rest = rawPath.slice(GATEWAY_PREFIX.length).replace(/^\//, '');
  const slash = rest.indexOf('/');
  const rawBucket = slash < 0 ? rest : rest.slice(0, slash);
  const rawKey = slash < 0 ? '' : rest.slice(slash + 1);
  const bucket = rawBucket ? decodePath(rawBucket) : undefined;
  const key = rawKey ? decodePath(rawKey) : undefined;
  if (key !== undefined && Buffer.byteLength(key) > 1024)
    throw new ObjectError('KeyTooLongError', 'Your key is too long.');
  const query = new Map<string, string>();
  for (const [k, v] of parseQuery(rawQuery)) if (!query.has(k)) query.set(k, v);
  // The gateway is not zod-validated: the one text rule of the API (PostgreSQL text holds
  // no NUL and no lone surrogate) is applied here to everything a query may be given.
  refuseUnstorable('the object key', key);
  refuseUnstorable('the bucket name', bucket);
  for (const [k, v] of query) {
    refuseUnstorable('a query parameter name', k);
    refuseUnstorable(`the query parameter ${k}`, v);
  }
  const resource = `/${bucket ?? ''}${key !== undefined ? `/${key}` : ''}`;
  return { rawPath, rawQuery, bucket, key, query, resource };
}

function refuseUnstorable(what: string, text: string | undefined): void {
  const why = text === undefined ? undefined : unstorableText(text);
  if (why) throw new ObjectError('InvalidArgument', `${what} ${why}.`);
}

/** An integer query parameter within bounds, or `fallback` when absent. */
export function intParam(
  query: Map<string, string>,
  name: string,
  fallback: number,
  min: number,
  max: number,
): number {
  const raw = query.get(name);
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min)
    throw new ObjectError('InvalidArgument', `${name} must be an integer of at least ${min}.`);
  return Math.min(n, max);
}
