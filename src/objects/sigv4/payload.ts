/**
 * The body side of SigV4: what `x-amz-content-sha256` promises, and streams that hold the body
 * to that promise (and to any `x-amz-checksum-*` header) while it passes through.
 */
import { Transform, type TransformCallback } from 'node:stream';
import { UNSIGNED_PAYLOAD, headerValue } from './canonical.js';
import { AwsChunkedDecoder } from './chunked.js';
import { startDigests, type DigestTask } from '../hashing/digest-pool.js';
import type { DigestAlgorithm } from '../hashing/running.js';
import { claimedChecksums, verifyChecksums } from './checksum.js';
import { SigV4Error } from './errors.js';
import type { HeaderBag, PayloadAuth, VerifiedAuth } from './types.js';

const STREAMING_SIGNED = 'STREAMING-AWS4-HMAC-SHA256-PAYLOAD';
const STREAMING_SIGNED_TRAILER = 'STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER';
const STREAMING_UNSIGNED_TRAILER = 'STREAMING-UNSIGNED-PAYLOAD-TRAILER';

/** The kinds of payload line S3 accepts. */
export type PayloadLineKind =
  | 'sha256'
  | 'unsigned'
  | 'streaming-signed'
  | 'streaming-signed-trailer'
  | 'streaming-unsigned-trailer';

/**
 * Classifies an `x-amz-content-sha256` value.
 *
 * @throws {SigV4Error} `InvalidArgument` for anything S3 would not accept (including the
 *   SigV4a `STREAMING-AWS4-ECDSA-P256-SHA256-PAYLOAD`, which needs asymmetric keys).
 */
export function classifyPayload(line: string): PayloadLineKind {
  if (/^[0-9a-fA-F]{64}$/.test(line)) return 'sha256';
  switch (line) {
    case UNSIGNED_PAYLOAD:
      return 'unsigned';
    case STREAMING_SIGNED:
      return 'streaming-signed';
    case STREAMING_SIGNED_TRAILER:
      return 'streaming-signed-trailer';
    case STREAMING_UNSIGNED_TRAILER:
      return 'streaming-unsigned-trailer';
  }
  throw new SigV4Error(
    'InvalidArgument',
    'x-amz-content-sha256 must be UNSIGNED-PAYLOAD, STREAMING-UNSIGNED-PAYLOAD-TRAILER, STREAMING-AWS4-HMAC-SHA256-PAYLOAD, STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER or a valid sha256 value.',
    { ArgumentName: 'x-amz-content-sha256', ArgumentValue: line },
  );
}

/** What the signed streaming kinds need to check chunk signatures. */
export interface StreamingContext {
  seedSignature: string;
  signingKey: Buffer;
  datetime: string;
  scope: string;
}

/** The {@link PayloadAuth} for a verified request's payload line. */
export function payloadAuth(line: string, ctx: StreamingContext): PayloadAuth {
  const kind = classifyPayload(line);
  switch (kind) {
    case 'sha256':
      return { kind, hex: line.toLowerCase() };
    case 'unsigned':
    case 'streaming-unsigned-trailer':
      return { kind };
    case 'streaming-signed':
    case 'streaming-signed-trailer':
      return { kind: 'streaming-signed', ...ctx, trailer: kind === 'streaming-signed-trailer' };
  }
}

/**
 * A pass-through that fails at the end unless the data hashed to `sha256Hex` (when given) and
 * matches the `x-amz-checksum-*` header (when sent). Large bodies are hashed on a worker
 * thread (hashing/digest-pool.ts); the stream ends only once their digests are checked.
 */
class BodyCheck extends Transform {
  private readonly digests: DigestTask;
  private checked = false;

  constructor(
    private readonly sha256Hex: string | undefined,
    private readonly headers: HeaderBag,
  ) {
    super();
    const algorithms: DigestAlgorithm[] = [...claimedChecksums(headers).keys()];
    if (sha256Hex !== undefined) algorithms.push('sha256');
    const length = Number(headerValue(headers, 'content-length'));
    this.digests = startDigests(algorithms, Number.isFinite(length) ? length : undefined);
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    this.digests.update(chunk);
    callback(null, chunk);
  }

  override _flush(callback: TransformCallback): void {
    this.digests.finish().then(
      (digests) => {
        this.checked = true;
        try {
          const actual = digests.get('sha256')?.toString('hex');
          if (this.sha256Hex !== undefined && actual !== this.sha256Hex) {
            throw new SigV4Error('XAmzContentSHA256Mismatch', undefined, {
              ClientComputedContentSHA256: this.sha256Hex,
              S3ComputedContentSHA256: actual ?? '',
            });
          }
          verifyChecksums(this.headers, {
            digest: (algorithm) => digests.get(algorithm)!.toString('base64'),
          });
          callback();
        } catch (err) {
          callback(err as Error);
        }
      },
      (err: unknown) => callback(err instanceof Error ? err : new Error(String(err))),
    );
  }

  override _destroy(err: Error | null, callback: (error?: Error | null) => void): void {
    if (!this.checked) this.digests.abort();
    callback(err);
  }
}

/** `x-amz-decoded-content-length` as a number, if sent. */
function decodedLength(headers: HeaderBag): number | undefined {
  const value = headerValue(headers, 'x-amz-decoded-content-length')?.trim();
  if (value === undefined) return undefined;
  if (!/^\d{1,15}$/.test(value)) {
    throw new SigV4Error('InvalidArgument', 'x-amz-decoded-content-length is not a valid length.', {
      ArgumentName: 'x-amz-decoded-content-length',
      ArgumentValue: value,
    });
  }
  return Number(value);
}

/**
 * The stream to pipe a verified request's raw body through: it emits the object's bytes and
 * fails with a {@link SigV4Error} unless the body is what the signature promised: the SHA-256
 * of `x-amz-content-sha256` (`XAmzContentSHA256Mismatch`), a valid aws-chunked encoding (see
 * {@link AwsChunkedDecoder}), and any `x-amz-checksum-*` header or trailer (`BadDigest`).
 * The failure comes before the stream ends, so a store that commits on end commits only
 * verified data.
 *
 * @throws {SigV4Error} at once (`InvalidArgument`, `InvalidRequest`) when
 *   `x-amz-decoded-content-length` or an `x-amz-checksum-*` header is malformed.
 */
export function createBodyVerifier(
  auth: Pick<VerifiedAuth, 'payload'>,
  headers: HeaderBag,
  opts: { maxChunkSize?: number } = {},
): Transform {
  const payload = auth.payload;
  if (payload.kind === 'streaming-signed' || payload.kind === 'streaming-unsigned-trailer') {
    return new AwsChunkedDecoder({
      payload,
      decodedContentLength: decodedLength(headers),
      declaredTrailers: headerValue(headers, 'x-amz-trailer')
        ?.split(',')
        .map((s) => s.trim())
        .filter((s) => s !== ''),
      checksumHeaders: headers,
      maxChunkSize: opts.maxChunkSize,
    });
  }
  return new BodyCheck(payload.kind === 'sha256' ? payload.hex : undefined, headers);
}
