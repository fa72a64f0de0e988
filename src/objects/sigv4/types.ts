/** Shapes shared by the SigV4 verifier, the aws-chunked decoder and the body helpers. */

/** Request headers as Node hands them over: lowercased names, repeated ones as arrays. */
export type HeaderBag = Record<string, string | string[] | undefined>;

/** What the verifier needs from an incoming request, taken before anything decodes it. */
export interface SigV4Request {
  /** The request method, e.g. `GET`. */
  method: string;
  /** The path part of the request line, still percent-encoded: `/s3/my-bucket/a%20b.txt`. */
  rawPath: string;
  /** The raw query string, without the `?`. */
  query: string;
  /** Node's `IncomingHttpHeaders` (lowercased names). */
  headers: HeaderBag;
}

/** How the body of a verified request is authenticated, from `x-amz-content-sha256`. */
export type PayloadAuth =
  /** The whole body must hash to `hex` (lowercase SHA-256). */
  | { kind: 'sha256'; hex: string }
  /** `UNSIGNED-PAYLOAD`: the body is not covered by the signature. */
  | { kind: 'unsigned' }
  /** `STREAMING-AWS4-HMAC-SHA256-PAYLOAD[-TRAILER]`: aws-chunked, every chunk signed. */
  | {
      kind: 'streaming-signed';
      /** The request's own signature, which the first chunk's signature chains from. */
      seedSignature: string;
      /** The derived SigV4 signing key for this request's scope. */
      signingKey: Buffer;
      /** The request time, ISO 8601 basic (`20260101T000000Z`). */
      datetime: string;
      /** The credential scope, `20260101/us-east-1/s3/aws4_request`. */
      scope: string;
      /** True for the `-TRAILER` variant: a signed trailer follows the last chunk. */
      trailer: boolean;
    }
  /** `STREAMING-UNSIGNED-PAYLOAD-TRAILER`: aws-chunked without signatures, checksum trailer. */
  | { kind: 'streaming-unsigned-trailer' };

/** The payload kinds that arrive aws-chunked. */
export type StreamingPayloadAuth = Extract<
  PayloadAuth,
  { kind: 'streaming-signed' | 'streaming-unsigned-trailer' }
>;

/** The outcome of a successful verification. */
export interface VerifiedAuth {
  /** The access key the request was signed with. */
  accessKeyId: string;
  /** The region named in the credential scope. */
  region: string;
  /** The signed header names, as the client listed them. */
  signedHeaders: string[];
  /** How the body is to be checked; see {@link PayloadAuth}. */
  payload: PayloadAuth;
  /** Whether the signature came in the `Authorization` header or in a presigned query. */
  form: 'header' | 'query';
}
