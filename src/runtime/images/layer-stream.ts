/**
 * The uncompressed bytes of a stored layer blob, hashed on the way so the unpacker can
 * check them against the config's `rootfs.diff_ids`. Compression is sniffed from the
 * first bytes rather than trusted from the media type: gzip is inflated with node:zlib,
 * plain tar passes through, and zstd is refused (Node 20's zlib has no zstd).
 */
import { createHash, type Hash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { open } from 'node:fs/promises';
import { pipeline } from 'node:stream';
import { createGunzip } from 'node:zlib';
import { ImageError } from './errors.js';

const GZIP = [0x1f, 0x8b];
const ZSTD = [0x28, 0xb5, 0x2f, 0xfd];

async function magic(file: string): Promise<Buffer> {
  const fh = await open(file, 'r');
  try {
    const buf = Buffer.alloc(4);
    const { bytesRead } = await fh.read(buf, 0, 4, 0);
    return buf.subarray(0, bytesRead);
  } finally {
    await fh.close();
  }
}

const startsWith = (buf: Buffer, sig: number[]) => sig.every((b, i) => buf[i] === b);

/** A layer's tar bytes and the running sha256 of them. */
export interface LayerStream {
  chunks: AsyncIterable<Buffer>;
  /** `sha256:<hex>` of everything `chunks` yielded; call once they are exhausted. */
  diffId(): string;
}

/**
 * Opens a stored layer blob as uncompressed tar. `onBytes` sees the size of each chunk
 * before it is handed on, and may throw to stop the inflation there (the unpack budget).
 */
export async function openLayer(
  file: string,
  layer: string,
  signal?: AbortSignal,
  onBytes?: (n: number) => void,
): Promise<LayerStream> {
  const head = await magic(file);
  if (startsWith(head, ZSTD)) {
    throw new ImageError(
      'unsupported',
      `Layer ${layer} is zstd-compressed, which is not supported yet.`,
    );
  }
  const gzip = startsWith(head, GZIP);
  const hash: Hash = createHash('sha256');
  async function* chunks(): AsyncGenerator<Buffer> {
    const raw = createReadStream(file, { highWaterMark: 256 * 1024 });
    // pipeline() wires error propagation and teardown between the file and the inflater.
    const plain = gzip ? pipeline(raw, createGunzip(), () => undefined) : raw;
    try {
      for await (const chunk of plain as AsyncIterable<Buffer>) {
        signal?.throwIfAborted();
        onBytes?.(chunk.length);
        hash.update(chunk);
        yield chunk;
      }
    } catch (err) {
      if (signal?.aborted || err instanceof ImageError) throw err;
      throw new ImageError(
        'unsupported',
        `Layer ${layer} is not valid ${gzip ? 'gzip' : 'tar'} data.`,
        {
          cause: err,
        },
      );
    } finally {
      raw.destroy();
    }
  }
  return { chunks: chunks(), diffId: () => `sha256:${hash.digest('hex')}` };
}
