/**
 * The pass-through every blob write goes through: it counts the bytes, hashes them (MD5 for
 * the ETag, SHA-256 when a client sent one to check) and stops a body that grows past its
 * limit, all in the one pass that also writes them, so nothing is read twice or buffered.
 * Large bodies are hashed on a worker thread (see hashing/digest-pool.ts); the stream ends
 * only once their digests are in, so a store that commits after the stream commits digests
 * that are known.
 */
import { Transform, type TransformCallback } from 'node:stream';
import { startDigests, type DigestTask } from '../hashing/digest-pool.js';
import { BlobError, type BlobWriteResult } from './blob-store.js';
import { errorMessage } from './stream-failure.js';

/** Options for a {@link DigestMeter}. */
export interface DigestMeterOptions {
  sha256?: boolean;
  maxBytes?: number;
  /** The body's expected size, when known: small bodies are hashed inline. */
  sizeHint?: number;
  /** Buffering between the source and the sink. */
  highWaterMark?: number;
}

/**
 * A Transform that passes bytes through unchanged while measuring them. Its state is in
 * `#private` fields on purpose: the S3 SDK's Upload guesses a body's length from properties
 * such as `size` or `length`, and took a TypeScript-private `size` of 0 for the total.
 */
export class DigestMeter extends Transform {
  readonly #digests: DigestTask;
  readonly #maxBytes: number;
  #size = 0;
  #result: BlobWriteResult | undefined;

  constructor(opts: DigestMeterOptions = {}) {
    super({
      readableHighWaterMark: opts.highWaterMark,
      writableHighWaterMark: opts.highWaterMark,
    });
    this.#digests = startDigests(opts.sha256 ? ['md5', 'sha256'] : ['md5'], opts.sizeHint);
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
    this.#digests.update(chunk);
    callback(null, chunk);
  }

  override _flush(callback: TransformCallback): void {
    this.#digests.finish().then(
      (digests) => {
        const result: BlobWriteResult = { size: this.#size, md5: digests.get('md5')! };
        const sha256 = digests.get('sha256');
        if (sha256) result.sha256 = sha256;
        this.#result = result;
        callback();
      },
      (err: unknown) => callback(new BlobError('backend', `hashing: ${errorMessage(err)}`)),
    );
  }

  override _destroy(err: Error | null, callback: (error?: Error | null) => void): void {
    if (!this.#result) this.#digests.abort();
    callback(err);
  }

  /** The measurements; available once the stream has ended. */
  result(): BlobWriteResult {
    if (!this.#result) throw new Error('DigestMeter.result() before the end of the stream');
    return this.#result;
  }
}
