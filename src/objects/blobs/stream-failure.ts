/**
 * Telling apart why a streamed write failed. A pipeline rejects with one error, but once a
 * stream fails it destroys the others with that same error, so the error alone does not say
 * whether the client's body broke (a dropped connection: 'aborted') or the place the bytes
 * were going did (a full disk, an S3 outage: 'backend'). Watching which stream failed first
 * does.
 */
import type { Readable, Writable } from 'node:stream';
import { BlobError } from './blob-store.js';

/** Which side of a write failed first, as far as has been seen. */
export type FailureOrigin = () => 'source' | 'sink' | undefined;

/**
 * Starts watching `source` and `sink`; call before handing them to `pipeline`, so these
 * listeners run before the pipeline's own and see the first failure as it happens.
 */
export function watchFailureOrigin(source: Readable, sink: Writable): FailureOrigin {
  let origin: 'source' | 'sink' | undefined;
  source.once('error', () => (origin ??= 'source'));
  // A body destroyed without an error (a socket that just closed) ends without 'end'.
  source.once('close', () => {
    if (!source.readableEnded) origin ??= 'source';
  });
  sink.once('error', () => (origin ??= 'sink'));
  return () => origin;
}

/**
 * The BlobError for a failed streamed write: the stores' own errors as they are ('too-large'
 * from the meter, 'not-found' from a concat part), 'aborted' when the client's body failed
 * first, and 'backend' otherwise.
 */
export function writeFailure(err: unknown, origin: FailureOrigin, what: string): BlobError {
  if (err instanceof BlobError) return err;
  if (origin() === 'source') {
    return new BlobError('aborted', `${what}: the body stream failed or ended early`, {
      cause: err,
    });
  }
  return new BlobError('backend', `${what}: ${errorMessage(err)}`, { cause: err });
}

/** A short message from anything thrown. */
export function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
