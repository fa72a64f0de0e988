/**
 * AWS Signature Version 4 for pier's S3-compatible gateway, server side.
 *
 * - {@link verifyRequest} authenticates a request (header or presigned form) and says how its
 *   body must be checked; {@link authForm} tells anonymous requests apart beforehand.
 * - {@link createBodyVerifier} turns the raw body into the object's bytes, failing unless they
 *   are what the signature and checksums promised ({@link decodeAwsChunked} for aws-chunked
 *   bodies, {@link verifyChecksums} for `x-amz-checksum-*`).
 * - {@link presignUrl} mints presigned URLs the verifier accepts.
 * - {@link decodePath} / {@link parseQuery} decode the raw path and query with the same rules
 *   the signature covers, so routing sees the key that was signed.
 *
 * Every failure is a {@link SigV4Error} carrying S3's error code and status.
 */
export { SigV4Error, sigV4ErrorStatus, type SigV4ErrorCode } from './errors.js';
export type {
  HeaderBag,
  PayloadAuth,
  SigV4Request,
  StreamingPayloadAuth,
  VerifiedAuth,
} from './types.js';
export { verifyRequest, type SecretLookup, type VerifyOptions } from './verify.js';
export { authForm, MAX_PRESIGN_EXPIRES_S, type AuthForm } from './parse-auth.js';
export {
  ALGORITHM,
  EMPTY_SHA256,
  UNSIGNED_PAYLOAD,
  canonicalHeaders,
  canonicalRequest,
  credentialScope,
  formatDatetime,
  signatureHex,
  signingKey,
  stringToSign,
  type CanonicalRequestInput,
} from './canonical.js';
export {
  canonicalQuery,
  canonicalUri,
  decodePath,
  encodeKeyPath,
  parseQuery,
  uriEncode,
} from './uri.js';
export {
  AwsChunkedDecoder,
  DEFAULT_MAX_CHUNK_SIZE,
  decodeAwsChunked,
  type AwsChunkedOptions,
  type AwsChunkedResult,
} from './chunked.js';
export {
  CHECKSUM_ALGORITHMS,
  Checksummer,
  checksumAlgorithmOf,
  checksumField,
  claimedChecksums,
  computeChecksum,
  crc32,
  crc32c,
  crc64nvme,
  verifyChecksums,
  type ChecksumAlgorithm,
} from './checksum.js';
export { classifyPayload, createBodyVerifier, type PayloadLineKind } from './payload.js';
export { presignUrl, type PresignInput, type PresignedUrl } from './presign.js';
