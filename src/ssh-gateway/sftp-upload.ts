/**
 * The bytes of one SFTP file opened for writing, handed to the files service as they
 * come (services/machines/files.ts writeGuestFile: into a new file beside the target,
 * renamed over it at the end, so the file lands whole and atomically when the client
 * closes its handle, or not at all).
 *
 * Writes must come in order (each at the offset where the last ended, as OpenSSH's scp
 * and sftp send them); the file is capped as the files route's are. A WRITE is answered
 * once the file takes its bytes, so a client's outstanding requests (OpenSSH: 64 of 32
 * KiB) are what waits here; a client that sends past `PENDING_CAP` without waiting is
 * refused rather than held in memory.
 */

/** Bytes of one upload that may wait for the file to take them. */
export const PENDING_CAP = 8 * 1024 * 1024;

/** A WRITE the upload cannot take: said to the client with this code and message. */
export class UploadRefused extends Error {
  constructor(
    readonly code: 'too-large' | 'unprocessable',
    message: string,
  ) {
    super(message);
    this.name = 'UploadRefused';
  }
}

interface Waiting {
  chunk: Buffer;
  taken: () => void;
  refused: (err: Error) => void;
}

export class Upload implements AsyncIterable<Buffer> {
  /** Bytes accepted so far: where the next WRITE must start. */
  received = 0;
  private pending: Waiting[] = [];
  private pendingBytes = 0;
  private ended = false;
  private failure: Error | undefined;
  /** The writer waiting for the next chunk. */
  private wake: (() => void) | undefined;
  private begin!: () => void;
  /** Resolves when the writer first asks for bytes: its checks passed, its file is open. */
  readonly started = new Promise<void>((resolve) => (this.begin = resolve));

  constructor(private readonly cap: number) {}

  /** Queues `data` written at `offset`; resolves when the writer takes it. */
  push(offset: number, data: Buffer): Promise<void> {
    if (this.failure) return Promise.reject(this.failure);
    if (this.ended) return Promise.reject(new UploadRefused('unprocessable', 'the file is closed'));
    // A refused WRITE drops the upload: the client's CLOSE must not land half a file.
    const refuse = (code: UploadRefused['code'], message: string) => {
      const err = new UploadRefused(code, message);
      this.abort(err);
      return Promise.reject(err);
    };
    if (offset !== this.received) {
      return refuse(
        'unprocessable',
        `writes must come in order: this one is at ${offset}, the file ends at ${this.received} (files are written whole)`,
      );
    }
    if (this.received + data.length > this.cap) {
      return refuse('too-large', `at most ${this.cap} bytes may be written at once`);
    }
    if (this.pendingBytes + data.length > PENDING_CAP) {
      return refuse('unprocessable', 'too many writes sent without waiting for answers');
    }
    this.received += data.length;
    this.pendingBytes += data.length;
    return new Promise<void>((taken, refused) => {
      this.pending.push({ chunk: data, taken, refused });
      this.wake?.();
    });
  }

  /** No more bytes: the writer finishes the file. */
  end(): void {
    this.ended = true;
    this.wake?.();
  }

  /** Stops the upload: the writer fails with `err` (and removes what it wrote), WRITEs too. */
  abort(err: Error): void {
    if (this.failure) return;
    this.failure = err;
    for (const w of this.pending.splice(0)) w.refused(err);
    this.pendingBytes = 0;
    this.wake?.();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<Buffer> {
    this.begin();
    for (;;) {
      if (this.failure) throw this.failure;
      const next = this.pending.shift();
      if (next) {
        this.pendingBytes -= next.chunk.length;
        next.taken();
        yield next.chunk;
        continue;
      }
      if (this.ended) return;
      await new Promise<void>((resolve) => (this.wake = resolve));
      this.wake = undefined;
    }
  }
}
