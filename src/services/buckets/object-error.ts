/**
 * Failures of object operations, named by their S3 error codes. Each transport has one
 * mapping: the S3 gateway renders them as S3 XML errors with this status
 * (http/s3/errors.ts), the JSON routes answer with a catalogue code
 * (http/plugins/object-errors.ts).
 */
export const s3ErrorStatus = {
  AccessDenied: 403,
  BadDigest: 400,
  EntityTooLarge: 400,
  EntityTooSmall: 400,
  IncompleteBody: 400,
  InvalidArgument: 400,
  InvalidBucketName: 400,
  InvalidPart: 400,
  InvalidPartOrder: 400,
  InvalidRange: 416,
  InvalidRequest: 400,
  KeyTooLongError: 400,
  MalformedXML: 400,
  MethodNotAllowed: 405,
  MissingContentLength: 411,
  NoSuchBucket: 404,
  NoSuchKey: 404,
  NoSuchUpload: 404,
  NotImplemented: 501,
  PreconditionFailed: 412,
  XAmzContentSHA256Mismatch: 400,
  InternalError: 500,
} as const;

export type S3ErrorCode = keyof typeof s3ErrorStatus;

export class ObjectError extends Error {
  readonly status: number;

  constructor(
    readonly code: S3ErrorCode,
    message: string,
    /** Extra elements of the XML error body (Key, BucketName, UploadId…). */
    readonly fields: Record<string, string> = {},
  ) {
    super(message);
    this.name = 'ObjectError';
    this.status = s3ErrorStatus[code];
  }
}
