/**
 * The pass-through every blob write goes through: it counts the bytes, hashes them (MD5 for
 * the ETag, SHA-256 when a client sent one to check) and stops a body that grows past its
 * limit, all in the one pass that also writes them, so nothing is read twice or buffered.
 */
import { createHash, type Hash } from 'node:crypto';
import { Transform, type TransformCallback } from 'node:stream';
import { BlobError, type BlobWriteResult } from './blob-store.js';

/** Options for a {@link DigestMeter}. */
export interface DigestMeterOptions {
  sha256?: boolean;
  maxBytes?: number;
  /** Buffering between the source and the sink; large, so that bytes move in big chunks. */
  highWaterMark?: number;
}

/**
 * A Transform that passes bytes through unchanged while measuring them. Its state is in
 * `#private` fields on purpose: the S3 SDK's Upload guesses a body's length from properties
 * such as `size` or `length`, and took a TypeScript-private `size` of 0 for the total.
 */
export class DigestMeter extends Transform {
  readonly #md5: Hash = createHash('md5');
  readonly #sha256: Hash | undefined;
  readonly #maxBytes: number;
  #size = 0;

  constructor(opts: DigestMeterOptions = {}) {
    super({
      readableHighWaterMark: opts.highWaterMark,
      writableHighWaterMark: opts.highWaterMark,
    });
    this.#sha256 = opts.sha256 ? createHash('sha256') : undefined;
    this.#maxBytes = opts.maxBytes ?? Infinity;
  }

  override _transform(
    chunk: unknown,
    _encoding: BufferEncoding,
    callback: TransformCallback,
  ): void {
    // Object-mode or string sources are a programming error upstream; bytes only.
    if (!(chunk instanceof Uint8Array)) {
      callback(new BlobError('backend', 'a blob body must be a stream of bytes'));
      return;
    }
    this.#size += chunk.byteLength;
    if (this.#size > this.#maxBytes) {
      callback(new BlobError('too-large', `the body is larger than ${this.#maxBytes} bytes`));
      return;
    }
    this.#md5.update(chunk);
    this.#sha256?.update(chunk);
    callback(null, chunk);
  }

  /** The measurements; call once, after every byte has passed. */
  result(): BlobWriteResult {
    const result: BlobWriteResult = { size: this.#size, md5: this.#md5.digest() };
    if (this.#sha256) result.sha256 = this.#sha256.digest();
    return result;
  }
}
