/**
 * The one error type of the SigV4 layer. It carries S3's own error codes and statuses so the
 * gateway can render S3's XML error body (`<Error><Code>…</Code><Message>…</Message>…`)
 * without a second mapping, and S3 clients recognise the answers they get.
 */

/** S3 error codes this layer raises, with the HTTP status S3 answers them with. */
export const sigV4ErrorStatus = {
  AccessDenied: 403,
  SignatureDoesNotMatch: 403,
  InvalidAccessKeyId: 403,
  RequestTimeTooSkewed: 403,
  AuthorizationHeaderMalformed: 400,
  AuthorizationQueryParametersError: 400,
  MissingSecurityHeader: 400,
  InvalidArgument: 400,
  InvalidURI: 400,
  XAmzContentSHA256Mismatch: 400,
  IncompleteBody: 400,
  InvalidRequest: 400,
  BadDigest: 400,
} as const;

/** One of the S3 error codes in {@link sigV4ErrorStatus}. */
export type SigV4ErrorCode = keyof typeof sigV4ErrorStatus;

/** S3's wording for each code, used when the thrower has nothing more specific to say. */
const defaultMessages: Record<SigV4ErrorCode, string> = {
  AccessDenied: 'Access Denied',
  SignatureDoesNotMatch:
    'The request signature we calculated does not match the signature you provided. Check your key and signing method.',
  InvalidAccessKeyId: 'The AWS Access Key Id you provided does not exist in our records.',
  RequestTimeTooSkewed:
    'The difference between the request time and the current time is too large.',
  AuthorizationHeaderMalformed: 'The authorization header is malformed.',
  AuthorizationQueryParametersError: 'The query-string authentication parameters are invalid.',
  MissingSecurityHeader: 'Your request was missing a required header.',
  InvalidArgument: 'Invalid Argument',
  InvalidURI: "Couldn't parse the specified URI.",
  XAmzContentSHA256Mismatch:
    "The provided 'x-amz-content-sha256' header does not match what was computed.",
  IncompleteBody:
    'You did not provide the number of bytes specified by the Content-Length HTTP header.',
  InvalidRequest: 'Invalid Request',
  BadDigest: 'The checksum you specified did not match what we received.',
};

/**
 * An authentication or payload-integrity failure, in S3's terms.
 *
 * `details` holds the extra child elements S3 puts in its XML error body, keyed by S3's element
 * names and in S3's order (e.g. `AWSAccessKeyId`, `StringToSign`, `SignatureProvided`,
 * `CanonicalRequest` for `SignatureDoesNotMatch`; `RequestTime`, `ServerTime`,
 * `MaxAllowedSkewMilliseconds` for `RequestTimeTooSkewed`). A renderer can emit them verbatim.
 */
export class SigV4Error extends Error {
  /** S3's error code, e.g. `SignatureDoesNotMatch`. */
  readonly code: SigV4ErrorCode;
  /** The HTTP status S3 answers this code with. */
  readonly status: number;
  /** Extra XML elements for the error body, by S3 element name. */
  readonly details: Readonly<Record<string, string>>;
  /** For `SignatureDoesNotMatch`: the string to sign the server computed (S3's `StringToSign`). */
  readonly stringToSign: string | undefined;
  /** For `SignatureDoesNotMatch`: the server's canonical request (S3's `CanonicalRequest`). */
  readonly canonicalRequest: string | undefined;

  constructor(code: SigV4ErrorCode, message?: string, details: Record<string, string> = {}) {
    super(message ?? defaultMessages[code]);
    this.name = 'SigV4Error';
    this.code = code;
    this.status = sigV4ErrorStatus[code];
    this.details = details;
    this.stringToSign = details.StringToSign;
    this.canonicalRequest = details.CanonicalRequest;
  }
}
