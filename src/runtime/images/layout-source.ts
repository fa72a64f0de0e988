/**
 * An OCI image layout on local disk (`oci-layout`, `index.json`, `blobs/sha256/…`) as a
 * blob source for the image builder, in place of a registry: how images that pier built
 * itself (runtime/builds) come into the store. Every blob is still verified against its
 * digest and held to the image caps on the way in, exactly as a pulled one.
 */
import { createReadStream } from 'node:fs';
import { mkdir, readFile, rename, rm, stat, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import { ImageError } from './errors.js';
import { IdleTimer, type Answer } from './http.js';
import { assertSha256 } from './manifest.js';

/** What the image builder needs of where blobs come from. */
export interface BlobSource {
  registry: string;
  repository: string;
  blob(digest: string, signal?: AbortSignal): Promise<Answer>;
}

/** The blobs of one OCI layout directory. */
export class LayoutSource implements BlobSource {
  readonly registry = 'local';

  constructor(
    private readonly dir: string,
    readonly repository: string,
  ) {}

  private file(digest: string): string {
    assertSha256(digest, `A blob of ${this.repository}`);
    return path.join(this.dir, 'blobs', 'sha256', digest.slice('sha256:'.length));
  }

  /** The digest and bytes of the layout's one manifest (the first of its index). */
  async manifest(): Promise<{ digest: string; body: Buffer }> {
    let index: { manifests?: { digest?: unknown }[] };
    try {
      index = JSON.parse(await readFile(path.join(this.dir, 'index.json'), 'utf8')) as typeof index;
    } catch {
      throw new ImageError('unsupported', `${this.repository} has no readable index.json.`);
    }
    const digest = index.manifests?.[0]?.digest;
    if (typeof digest !== 'string') {
      throw new ImageError('unsupported', `The index of ${this.repository} names no manifest.`);
    }
    return { digest, body: await readFile(this.file(digest)) };
  }

  async blob(digest: string): Promise<Answer> {
    const file = this.file(digest);
    const size = (await stat(file)).size;
    const body = Readable.toWeb(createReadStream(file)) as ReadableStream<Uint8Array>;
    // A local file never goes silent; the timer only satisfies the builder's contract.
    const idle = new IdleTimer(2 ** 31 - 1, () => undefined);
    return {
      response: new Response(body, { headers: { 'content-length': String(size) } }),
      idle,
      done: () => idle.clear(),
      url: new URL(`file://${file}`),
      fail: (err) => err,
    };
  }
}

/** One manifest and the blob files to link into a layout. */
export interface LinkedLayout {
  digest: string;
  size: number;
  mediaType: string;
  blobs: { digest: string; file: string }[];
}

/**
 * Writes an OCI layout at `dir` (replacing one there) whose blobs are symbolic links to
 * files elsewhere: a view of a stored image for a builder, with nothing copied.
 */
export async function writeLinkedLayout(dir: string, layout: LinkedLayout): Promise<void> {
  const tmp = `${dir}.tmp-${process.pid}-${Date.now()}`;
  await rm(tmp, { recursive: true, force: true });
  await mkdir(path.join(tmp, 'blobs', 'sha256'), { recursive: true, mode: 0o700 });
  for (const b of layout.blobs) {
    assertSha256(b.digest, 'A blob of a layout');
    await symlink(b.file, path.join(tmp, 'blobs', 'sha256', b.digest.slice('sha256:'.length)));
  }
  await writeFile(path.join(tmp, 'oci-layout'), '{"imageLayoutVersion":"1.0.0"}\n');
  const index = {
    schemaVersion: 2,
    manifests: [{ mediaType: layout.mediaType, digest: layout.digest, size: layout.size }],
  };
  await writeFile(path.join(tmp, 'index.json'), `${JSON.stringify(index)}\n`);
  await rm(dir, { recursive: true, force: true });
  await rename(tmp, dir);
}
