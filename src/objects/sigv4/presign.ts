/**
 * Mints presigned URLs for the gateway (e.g. for a dashboard download link or a browser
 * upload), in exactly the shape AWS SDKs produce, so any S3 tool recognises them and
 * {@link verifyRequest} accepts them.
 */
import {
  ALGORITHM,
  UNSIGNED_PAYLOAD,
  canonicalRequest,
  credentialScope,
  formatDatetime,
  sha256Hex,
  signatureHex,
  signingKey,
  stringToSign,
} from './canonical.js';
import { MAX_PRESIGN_EXPIRES_S } from './parse-auth.js';
import { canonicalQuery, canonicalUri, uriEncode } from './uri.js';

/** Input of {@link presignUrl}. */
export interface PresignInput {
  /** The method the URL is for, e.g. `GET` or `PUT`. */
  method: string;
  /** Scheme, host and port the client will reach: `http://127.0.0.1:8080`. */
  baseUrl: string;
  /** `/s3/<bucket>/<key>`, the key encoded with `encodeKeyPath` (AWS's per-segment rules). */
  path: string;
  accessKeyId: string;
  secret: string;
  region: string;
  /** Lifetime in seconds, 1..604800. */
  expiresInS: number;
  /** The signing time; the URL is valid from then for `expiresInS`. */
  now: Date;
  /**
   * Headers the client must send with exactly these values, e.g. `{'content-type': 'image/png'}`
   * for an upload. `host` is always signed and must not be given.
   */
  signedHeaders?: Record<string, string>;
  /** Extra query parameters to sign, e.g. `{'response-content-disposition': 'attachment'}`. */
  query?: Record<string, string>;
}

/** A presigned URL and the headers its user must send. */
export interface PresignedUrl {
  url: string;
  /** Every signed header but `host`, lowercased, with the value to send. */
  requiredHeaders: Record<string, string>;
}

/**
 * Presigns a request for the S3 gateway: a URL carrying `X-Amz-Algorithm`, `X-Amz-Credential`,
 * `X-Amz-Date`, `X-Amz-Expires`, `X-Amz-SignedHeaders` and `X-Amz-Signature`, with the payload
 * `UNSIGNED-PAYLOAD`, as AWS SDKs and the AWS CLI make them.
 *
 * @throws {RangeError} when `expiresInS` is outside 1..604800 or `host` is among `signedHeaders`.
 */
export function presignUrl(input: PresignInput): PresignedUrl {
  if (
    !Number.isInteger(input.expiresInS) ||
    input.expiresInS < 1 ||
    input.expiresInS > MAX_PRESIGN_EXPIRES_S
  ) {
    throw new RangeError(`expiresInS must be an integer in 1..${MAX_PRESIGN_EXPIRES_S}`);
  }
  const base = new URL(input.baseUrl);
  const requiredHeaders: Record<string, string> = {};
  for (const [name, value] of Object.entries(input.signedHeaders ?? {})) {
    const lower = name.toLowerCase();
    if (lower === 'host') throw new RangeError('host is always signed; do not pass it');
    requiredHeaders[lower] = value;
  }
  const headers = { ...requiredHeaders, host: base.host };
  const signedHeaders = Object.keys(headers).sort();

  const datetime = formatDatetime(input.now);
  const date = datetime.slice(0, 8);
  const scope = credentialScope(date, input.region);
  const params: Record<string, string> = {
    ...input.query,
    'X-Amz-Algorithm': ALGORITHM,
    'X-Amz-Credential': `${input.accessKeyId}/${scope}`,
    'X-Amz-Date': datetime,
    'X-Amz-Expires': String(input.expiresInS),
    'X-Amz-SignedHeaders': signedHeaders.join(';'),
  };
  // Built from the encoded parameters, so the URL carries its query in canonical order and
  // the server sees the very bytes that were signed.
  const query = canonicalQuery(
    Object.entries(params)
      .map(([name, value]) => `${uriEncode(name)}=${uriEncode(value)}`)
      .join('&'),
  );
  // The base URL's own path (a reverse-proxy prefix) is part of what the server receives.
  const rawPath = canonicalUri(base.pathname.replace(/\/+$/, '') + input.path);
  const canonical = canonicalRequest({
    method: input.method.toUpperCase(),
    rawPath,
    query,
    headers,
    signedHeaders,
    payloadHash: UNSIGNED_PAYLOAD,
  });
  const signature = signatureHex(
    signingKey(input.secret, date, input.region),
    stringToSign(datetime, scope, sha256Hex(canonical)),
  );
  return {
    url: `${base.protocol}//${base.host}${rawPath}?${query}&X-Amz-Signature=${signature}`,
    requiredHeaders,
  };
}
