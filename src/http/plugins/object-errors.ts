/**
 * The JSON routes' reading of `ObjectError`, the S3-named failure that the bucket services
 * throw (services/buckets/object-error.ts). The S3 gateway renders the same error as S3's
 * XML (http/s3/errors.ts); a JSON route answers with the catalogue code below and the
 * service's own sentence. The table is total over the S3 codes, so a code added there
 * cannot be forgotten here (the type check refuses it).
 */
import { ApiError, badRequest } from '../../errors/api-error.js';
import type { ErrorCode } from '../../errors/catalogue.js';
import type { ObjectError, S3ErrorCode } from '../../services/buckets/object-error.js';

const catalogueCode: Record<S3ErrorCode, ErrorCode> = {
  AccessDenied: 'forbidden',
  BadDigest: 'bad-request',
  EntityTooLarge: 'too-large',
  EntityTooSmall: 'bad-request',
  IncompleteBody: 'bad-request',
  InvalidArgument: 'bad-request',
  InvalidBucketName: 'bad-request',
  InvalidPart: 'bad-request',
  InvalidPartOrder: 'bad-request',
  InvalidRange: 'bad-request',
  InvalidRequest: 'bad-request',
  KeyTooLongError: 'bad-request',
  MalformedXML: 'bad-request',
  MethodNotAllowed: 'method-not-allowed',
  MissingContentLength: 'bad-request',
  NoSuchBucket: 'not-found',
  NoSuchKey: 'not-found',
  NoSuchUpload: 'not-found',
  NotImplemented: 'not-implemented',
  PreconditionFailed: 'conflict',
  XAmzContentSHA256Mismatch: 'bad-request',
  InternalError: 'internal',
};

/** The catalogue error a JSON route answers for `err`, with the service's sentence. */
export function objectErrorAsApiError(err: ObjectError): ApiError {
  const code = catalogueCode[err.code];
  if (code === 'bad-request') return badRequest([{ path: '', message: err.message }]);
  return new ApiError(code, err.message);
}
