/**
 * The blob store: where the bytes of objects live, behind one interface so that the
 * metadata layer (keys, sizes, ETags, listing in PostgreSQL) does not care whether they sit
 * in the data dir or in an S3 service. A blob is named by a namespace (one per bucket) and
 * an opaque id chosen by pier, never by the customer: both are checked against one strict
 * pattern, which is what keeps any caller-controlled string out of file paths and keys.
 */
import type { Readable } from 'node:stream';

/** What a completed write produced: its length and digests, computed in the same pass. */
export interface BlobWriteResult {
  size: number;
  md5: Buffer;
  sha256?: Buffer;
}

/** Options for {@link BlobStore.put}. */
export interface BlobPutOptions {
  /** Also compute the SHA-256 of the bytes (only when the caller must check one). */
  sha256?: boolean;
  /** Refuse (BlobError 'too-large') a body that grows past this many bytes. */
  maxBytes?: number;
  /** The body's expected size, when known: small bodies are hashed inline, large ones on a worker. */
  sizeHint?: number;
  /**
   * Called with the digests once all bytes are in and before the blob becomes visible;
   * throwing aborts the write and leaves nothing behind. What it throws is rethrown as is,
   * so a caller can throw its own error (say, a digest mismatch) and catch it again.
   */
  verify?: (result: BlobWriteResult) => void;
}

/** An inclusive byte range, as in an HTTP Range header. */
export interface BlobRange {
  start: number;
  end: number;
}

/** Where blobs live: the data dir ('fs') or an S3 service ('s3'). */
export interface BlobStore {
  readonly kind: 'fs' | 's3';
  /** Writes a blob atomically: it becomes visible under (ns, id) only once complete and verified; a failed or aborted stream leaves nothing. */
  put(ns: string, id: string, body: Readable, opts?: BlobPutOptions): Promise<BlobWriteResult>;
  /**
   * A stream of the blob's bytes, or of the inclusive byte range [start, end]. BlobError
   * 'not-found' when missing. The caller checks ranges against the size it knows: an end
   * past the last byte is cut to it, and a start past it gives an empty stream. The
   * caller must read the stream to its end or destroy it, which releases what it holds.
   */
  get(ns: string, id: string, range?: BlobRange): Promise<Readable>;
  /** Size of a blob, or undefined when it does not exist. */
  stat(ns: string, id: string): Promise<{ size: number } | undefined>;
  /** Idempotent. */
  delete(ns: string, id: string): Promise<void>;
  /**
   * A new blob made of the given blobs in order (multipart completion); the parts stay.
   * Returns the size and md5 of the whole. BlobError 'not-found' when a part is missing,
   * and then nothing is written.
   */
  concat(ns: string, id: string, parts: string[]): Promise<BlobWriteResult>;
  /** Removes the namespace and everything in it (bucket deletion). Idempotent. */
  deleteNamespace(ns: string): Promise<void>;
  /** Ids in the namespace whose blobs are older than `olderThan` (for sweeping orphans). */
  listOlderThan(ns: string, olderThan: Date): AsyncIterable<string>;
  /**
   * Removes what interrupted writes left behind (a crash mid-put) when it is older than
   * `olderThan`; returns how many things it removed. Meant for periodic housekeeping.
   */
  sweepTemp?(olderThan: Date): Promise<number>;
}

/** Why a blob operation failed; `code` is what callers branch on. */
export type BlobErrorCode = 'not-found' | 'too-large' | 'invalid-id' | 'aborted' | 'backend';

/**
 * The one error type of blob stores. 'aborted' means the body stream failed or ended
 * early (a client that went away); 'backend' means the disk or the S3 service failed.
 */
export class BlobError extends Error {
  constructor(
    readonly code: BlobErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'BlobError';
  }
}

/**
 * Namespaces and ids: lowercase letters, digits and dashes, 3 to 81 characters, not starting
 * with a dash. No dots and no slashes, so neither can walk out of its directory or prefix,
 * and none can collide with the stores' own `.tmp` area.
 */
export const BLOB_NAME = /^[a-z0-9][a-z0-9-]{2,80}$/;

/** Throws BlobError 'invalid-id' unless `name` is a valid namespace or id. */
export function assertBlobName(name: string, what: 'namespace' | 'id' = 'id'): void {
  if (typeof name !== 'string' || !BLOB_NAME.test(name)) {
    throw new BlobError('invalid-id', `invalid blob ${what}: ${JSON.stringify(name)}`);
  }
}

/** Checks a range handed to {@link BlobStore.get}; a malformed one is a caller's bug. */
export function assertRange(range: BlobRange): void {
  const { start, end } = range;
  if (!Number.isSafeInteger(start) || !Number.isSafeInteger(end) || start < 0 || end < start) {
    throw new RangeError(`invalid blob range ${start}-${end}`);
  }
}
