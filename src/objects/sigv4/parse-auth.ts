/**
 * Reads the signature's parameters out of a request, in either of S3's two forms: the
 * `Authorization` header or a presigned URL's `X-Amz-*` query parameters. Only structure is
 * checked here; times, keys and the signature itself are the verifier's business.
 */
import { ALGORITHM, SERVICE, TERMINATOR, headerValue } from './canonical.js';
import { SigV4Error, type SigV4ErrorCode } from './errors.js';
import type { SigV4Request } from './types.js';
import { parseQuery } from './uri.js';

/** How a request carries its credentials. */
export type AuthForm = 'header' | 'query' | 'anonymous';

/** The signature parameters of a request, structurally valid. */
export interface ParsedAuth {
  form: 'header' | 'query';
  accessKeyId: string;
  /** `YYYYMMDD` from the credential scope. */
  scopeDate: string;
  region: string;
  signedHeaders: string[];
  /** The signature the client sent, lowercased. */
  signature: string;
  /** Presigned only: `X-Amz-Date`, still unchecked. */
  amzDate?: string;
  /** Presigned only: `X-Amz-Expires`, within 1..604800. */
  expiresS?: number;
}

/** The most a presigned URL may live: seven days. */
export const MAX_PRESIGN_EXPIRES_S = 604_800;

const PRESIGN_PARAMS = [
  'X-Amz-Algorithm',
  'X-Amz-Credential',
  'X-Amz-Signature',
  'X-Amz-Date',
  'X-Amz-SignedHeaders',
  'X-Amz-Expires',
] as const;

const UNSUPPORTED =
  'The authorization mechanism you have provided is not supported. Please use AWS4-HMAC-SHA256.';

/**
 * Which form of authentication a request uses, without verifying anything: lets the gateway
 * serve anonymous requests (public buckets) without calling the verifier. Both forms at once is
 * refused, as S3 does.
 */
export function authForm(req: SigV4Request): AuthForm {
  const header = headerValue(req.headers, 'authorization');
  const names = new Set(parseQuery(req.query).map(([name]) => name));
  const query = names.has('X-Amz-Algorithm') || names.has('X-Amz-Credential');
  const legacyQuery = names.has('AWSAccessKeyId') && names.has('Signature');
  if (header !== undefined && (query || legacyQuery)) {
    throw new SigV4Error(
      'InvalidArgument',
      'Only one auth mechanism allowed; only the X-Amz-Algorithm query parameter, Signature query string parameter or the Authorization header should be specified',
    );
  }
  if (legacyQuery && !query) throw new SigV4Error('InvalidRequest', UNSUPPORTED);
  if (header !== undefined) return 'header';
  return query ? 'query' : 'anonymous';
}

/** `Credential` / `X-Amz-Credential`: `AKID/YYYYMMDD/region/s3/aws4_request`. */
function parseCredential(
  value: string,
  code: SigV4ErrorCode,
  prefix: string,
): Pick<ParsedAuth, 'accessKeyId' | 'scopeDate' | 'region'> {
  const parts = value.split('/');
  const [accessKeyId, scopeDate, region, service, terminator] = parts;
  if (
    parts.length !== 5 ||
    !accessKeyId ||
    !region ||
    service === undefined ||
    terminator === undefined ||
    !/^\d{8}$/.test(scopeDate ?? '')
  ) {
    throw new SigV4Error(
      code,
      `${prefix}; the Credential is mal-formed; expecting "<YOUR-AKID>/YYYYMMDD/REGION/SERVICE/aws4_request".`,
    );
  }
  if (service !== SERVICE) {
    throw new SigV4Error(
      code,
      `${prefix}; incorrect service "${service}". This endpoint belongs to "${SERVICE}".`,
    );
  }
  if (terminator !== TERMINATOR) {
    throw new SigV4Error(
      code,
      `${prefix}; incorrect terminal "${terminator}". This endpoint uses "${TERMINATOR}".`,
    );
  }
  return { accessKeyId, scopeDate: scopeDate ?? '', region };
}

/** `host;x-amz-date`: lowercase header names separated by `;`. */
function parseSignedHeaders(value: string, code: SigV4ErrorCode, prefix: string): string[] {
  const names = value.split(';');
  if (!names.every((n) => /^[a-z0-9!#$%&'*+.^_`|~-]+$/.test(n))) {
    throw new SigV4Error(code, `${prefix}; the SignedHeaders are mal-formed.`);
  }
  if (!names.includes('host')) {
    throw new SigV4Error(code, `${prefix}; the SignedHeaders must include host.`);
  }
  return names;
}

function parseSignature(value: string, code: SigV4ErrorCode, prefix: string): string {
  // Anything but hex cannot match; refusing early gives a clearer message than a mismatch.
  if (!/^[0-9a-fA-F]+$/.test(value)) {
    throw new SigV4Error(code, `${prefix}; the Signature is mal-formed.`);
  }
  return value.toLowerCase();
}

/**
 * Parses `AWS4-HMAC-SHA256 Credential=…, SignedHeaders=…, Signature=…`. Like S3 it does not
 * care whether the parts are separated by `,`, `, ` or spaces.
 */
export function parseAuthorizationHeader(value: string): ParsedAuth {
  const code = 'AuthorizationHeaderMalformed';
  const prefix = 'The authorization header is malformed';
  const match = /^\s*(\S+)(?:\s+(.*))?$/s.exec(value);
  if (!match || match[1] !== ALGORITHM) throw new SigV4Error('InvalidRequest', UNSUPPORTED);
  const fields = new Map<string, string>();
  for (const item of (match[2] ?? '').split(/[\s,]+/)) {
    if (item === '') continue;
    const eq = item.indexOf('=');
    const name = eq < 0 ? item : item.slice(0, eq);
    if (eq < 0 || fields.has(name)) {
      throw new SigV4Error(code, `${prefix}; the component "${item}" is not valid.`);
    }
    fields.set(name, item.slice(eq + 1));
  }
  for (const name of fields.keys()) {
    if (name !== 'Credential' && name !== 'SignedHeaders' && name !== 'Signature') {
      throw new SigV4Error(code, `${prefix}; the component "${name}" is not valid.`);
    }
  }
  const credential = fields.get('Credential');
  const signedHeaders = fields.get('SignedHeaders');
  const signature = fields.get('Signature');
  if (!credential || !signedHeaders || !signature) {
    throw new SigV4Error(
      code,
      `${prefix}; it must contain Credential, SignedHeaders and Signature components.`,
    );
  }
  return {
    form: 'header',
    ...parseCredential(credential, code, prefix),
    signedHeaders: parseSignedHeaders(signedHeaders, code, prefix),
    signature: parseSignature(signature, code, prefix),
  };
}

/** Parses a presigned URL's `X-Amz-*` parameters from the raw query string. */
export function parsePresignedQuery(rawQuery: string): ParsedAuth {
  const code = 'AuthorizationQueryParametersError';
  const params = new Map<string, string>();
  for (const [name, value] of parseQuery(rawQuery)) {
    if (!(PRESIGN_PARAMS as readonly string[]).includes(name)) continue;
    if (params.has(name)) throw new SigV4Error(code, `${name} must be given once.`);
    params.set(name, value);
  }
  const get = (name: (typeof PRESIGN_PARAMS)[number]): string => {
    const value = params.get(name);
    if (value === undefined || value === '') {
      throw new SigV4Error(
        code,
        'Query-string authentication version 4 requires the X-Amz-Algorithm, X-Amz-Credential, X-Amz-Signature, X-Amz-Date, X-Amz-SignedHeaders, and X-Amz-Expires parameters.',
      );
    }
    return value;
  };
  for (const name of PRESIGN_PARAMS) get(name);
  if (get('X-Amz-Algorithm') !== ALGORITHM) {
    throw new SigV4Error(code, `X-Amz-Algorithm only supports "${ALGORITHM}"`);
  }
  const expires = get('X-Amz-Expires');
  if (!/^\d+$/.test(expires)) {
    throw new SigV4Error(code, 'X-Amz-Expires should be a number');
  }
  const expiresS = Number(expires);
  if (expiresS < 1) throw new SigV4Error(code, 'X-Amz-Expires must be non-negative');
  if (expiresS > MAX_PRESIGN_EXPIRES_S) {
    throw new SigV4Error(
      code,
      `X-Amz-Expires must be less than a week (in seconds) that is ${MAX_PRESIGN_EXPIRES_S}`,
    );
  }
  const credentialPrefix = 'Error parsing the X-Amz-Credential parameter';
  return {
    form: 'query',
    ...parseCredential(get('X-Amz-Credential'), code, credentialPrefix),
    signedHeaders: parseSignedHeaders(
      get('X-Amz-SignedHeaders'),
      code,
      'Error parsing the X-Amz-SignedHeaders parameter',
    ),
    signature: parseSignature(
      get('X-Amz-Signature'),
      code,
      'Error parsing the X-Amz-Signature parameter',
    ),
    amzDate: get('X-Amz-Date'),
    expiresS,
  };
}
