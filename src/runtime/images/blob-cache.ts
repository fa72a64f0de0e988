/**
 * The content-addressed store of downloaded blobs (layers, configs, manifests):
 * `<dir>/blobs/sha256/<hex>`. A blob is streamed to a temp file while it is hashed and
 * counted, and renamed into place only when its sha256 and size are what its descriptor
 * said; otherwise the temp file is removed and the pull fails with `digest-mismatch`. So a
 * file under its digest's name always holds exactly those bytes, and a blob that is
 * present is never downloaded again.
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdir, open, readFile, readdir, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { ImageError } from './errors.js';
import type { Answer } from './http.js';

/** A progress report of one blob's download. */
export interface BlobProgress {
  layer: string;
  bytes: number;
  total?: number;
}

/** How often (in bytes) a download reports progress, besides at its end. */
const PROGRESS_STEP = 256 * 1024;

function hexOf(digest: string): string {
  const m = /^sha256:([a-f0-9]{64})$/.exec(digest);
  if (!m) throw new ImageError('unsupported', `${digest} is not a sha256 digest.`);
  return m[1]!;
}

/** Blobs on disk, named by digest. */
export class BlobCache {
  private readonly blobs: string;
  private readonly tmp: string;

  constructor(dir: string) {
    this.blobs = path.join(dir, 'blobs', 'sha256');
    this.tmp = path.join(dir, 'blobs', 'tmp');
  }

  /** Makes the directories and removes what interrupted downloads left behind. */
  async init(): Promise<void> {
    await mkdir(this.blobs, { recursive: true, mode: 0o700 });
    await rm(this.tmp, { recursive: true, force: true });
    await mkdir(this.tmp, { recursive: true, mode: 0o700 });
  }

  /** Where a blob lives (whether or not it is there). */
  path(digest: string): string {
    return path.join(this.blobs, hexOf(digest));
  }

  /** True when the blob is present (with the expected size, when one is given). */
  async has(digest: string, size?: number): Promise<boolean> {
    const st = await stat(this.path(digest)).catch(() => undefined);
    return !!st && st.isFile() && (size === undefined || st.size === size);
  }

  /** The size of a stored blob, or undefined when it is not here. */
  async size(digest: string): Promise<number | undefined> {
    const st = await stat(this.path(digest)).catch(() => undefined);
    return st?.isFile() ? st.size : undefined;
  }

  async read(digest: string): Promise<Buffer> {
    return readFile(this.path(digest));
  }

  /** Stores bytes already verified against `digest` (manifests the client checked). */
  async writeVerified(digest: string, bytes: Buffer): Promise<void> {
    if (await this.has(digest, bytes.length)) return;
    await this.commit(digest, async (file) => {
      const fh = await open(file, 'wx', 0o600);
      try {
        await fh.writeFile(bytes);
        await fh.sync();
      } finally {
        await fh.close();
      }
    });
  }

  /**
   * Streams a download into the store, verifying size and digest before it becomes
   * visible. `answer` is an open blob response; its body is consumed here.
   */
  async download(
    digest: string,
    size: number,
    answer: Answer,
    what: string,
    onProgress?: (p: BlobProgress) => void,
  ): Promise<void> {
    const hash = createHash('sha256');
    let bytes = 0;
    let reported = 0;
    try {
      // A registry that announces more than the descriptor's size is refused before a
      // byte is read; one that sends more without saying so, at the first byte too many.
      const headers = answer.response.headers;
      const announced = Number(headers.get('content-length') ?? NaN);
      if (!headers.has('content-encoding') && Number.isFinite(announced) && announced > size) {
        throw new ImageError(
          'digest-mismatch',
          `${what} (${digest}) is announced as ${announced} bytes, more than the ${size} its manifest gives.`,
        );
      }
      await this.commit(digest, async (file) => {
        const fh = await open(file, 'wx', 0o600);
        try {
          const body = answer.response.body;
          if (body) {
            for await (const chunk of body) {
              answer.idle.touch();
              bytes += chunk.byteLength;
              if (bytes > size) {
                await body.cancel().catch(() => undefined);
                throw new ImageError(
                  'digest-mismatch',
                  `${what} (${digest}) is longer than the ${size} bytes its manifest gives.`,
                );
              }
              hash.update(chunk);
              await fh.write(chunk);
              if (onProgress && bytes - reported >= PROGRESS_STEP) {
                reported = bytes;
                onProgress({ layer: digest, bytes, total: size });
              }
            }
          }
          if (bytes !== size) {
            throw new ImageError(
              'digest-mismatch',
              `${what} (${digest}) has ${bytes} bytes, not the ${size} its manifest gives.`,
            );
          }
          const got = `sha256:${hash.digest('hex')}`;
          if (got !== digest) {
            throw new ImageError(
              'digest-mismatch',
              `${what} should hash to ${digest} but hashes to ${got}.`,
            );
          }
          await fh.sync();
        } finally {
          await fh.close();
        }
      });
    } catch (err) {
      await answer.response.body?.cancel().catch(() => undefined);
      throw err instanceof ImageError ? err : answer.fail(err);
    } finally {
      answer.done();
    }
    onProgress?.({ layer: digest, bytes, total: size });
  }

  /** Writes through a temp file that `write` fills, then renames it into place. */
  private async commit(digest: string, write: (file: string) => Promise<void>): Promise<void> {
    const file = path.join(this.tmp, `${hexOf(digest)}.${randomBytes(6).toString('hex')}`);
    try {
      await write(file);
      await rename(file, this.path(digest));
    } catch (err) {
      await rm(file, { force: true });
      throw err;
    }
  }

  /** Removes a blob; idempotent. */
  async remove(digest: string): Promise<void> {
    await rm(this.path(digest), { force: true });
  }

  /** Every stored digest. */
  async list(): Promise<string[]> {
    const names = await readdir(this.blobs).catch(() => [] as string[]);
    return names.filter((n) => /^[a-f0-9]{64}$/.test(n)).map((n) => `sha256:${n}`);
  }
}
