/**
 * What one image may occupy on this host, and the running count that enforces it while a
 * pull streams. A customer's image is untrusted input: a small gzip layer can inflate to
 * terabytes (a tar bomb), and a layer of millions of empty files or links exhausts inodes
 * without any bytes at all. So each pull has an {@link UnpackBudget}, charged as the blobs
 * and entries go by, that stops the pull (ImageError `too-large`) the moment a cap is
 * passed, never after the fact:
 *
 * - `maxDownloadBytes`: the compressed sizes the manifest declares for the config and
 *   layers, checked before anything is downloaded (blob-cache.ts refuses a blob whose
 *   registry sends more than its declared size, so declared sizes are what we store).
 * - `maxUnpackedBytes`: the contents of regular files, by the size in each entry's header
 *   (a sparse file counts by its apparent size, since it is written out in full; a hard
 *   link adds nothing, so linked data counts once), charged before the file is written.
 * - `maxEntries`: entries read from the layers' tars (files, directories, links,
 *   whiteouts, skipped devices), charged before each is applied.
 * - The tar stream itself (headers, pax records, padding, whatever follows the end of an
 *   archive) may not exceed what those two caps allow by more than a generous margin, so a
 *   layer that inflates to terabytes of metadata or trailing junk is cut off too.
 *
 * Counts add up over all the layers of an image: a file that a later layer replaces or
 * deletes still counts (an upper bound of the root's size, and what unpacking wrote).
 */
import { ImageError } from './errors.js';

/** The caps on one image; the operator's settings (config.ts) reach here through the store. */
export interface ImageLimits {
  /** Bytes of regular file contents once unpacked (`PIER_IMAGE_MAX_UNPACKED_GB`). */
  maxUnpackedBytes: number;
  /** Entries of all layers together (`PIER_IMAGE_MAX_ENTRIES`). */
  maxEntries: number;
  /** Compressed bytes of the config and layers to download (`PIER_IMAGE_MAX_DOWNLOAD_GB`). */
  maxDownloadBytes: number;
}

const GIB = 1024 * 1024 * 1024;

/** The defaults of config.ts: 10 GiB unpacked, 1,000,000 entries, 5 GiB compressed. */
export const DEFAULT_IMAGE_LIMITS: ImageLimits = {
  maxUnpackedBytes: 10 * GIB,
  maxEntries: 1_000_000,
  maxDownloadBytes: 5 * GIB,
};

/** `given` with the defaults where it says nothing. */
export function imageLimits(given: Partial<ImageLimits> = {}): ImageLimits {
  return {
    maxUnpackedBytes: given.maxUnpackedBytes ?? DEFAULT_IMAGE_LIMITS.maxUnpackedBytes,
    maxEntries: given.maxEntries ?? DEFAULT_IMAGE_LIMITS.maxEntries,
    maxDownloadBytes: given.maxDownloadBytes ?? DEFAULT_IMAGE_LIMITS.maxDownloadBytes,
  };
}

/** Tar bytes allowed per entry beyond its file contents: header, a pax record, padding. */
const TAR_OVERHEAD_PER_ENTRY = 4096;
/** And per image: end-of-archive blocks and the padding some tools add after them. */
const TAR_OVERHEAD = 16 * 1024 * 1024;

/** `1 MiB`, `10 GiB`, `1.5 GiB`, `512 KiB`. */
export function formatBytes(n: number): string {
  const units = ['bytes', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = n;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${Number.isInteger(v) ? v : v.toFixed(1)} ${units[i]}`;
}

/** Refuses a pull whose declared downloads exceed the cap, before any blob is fetched. */
export function checkDownloadSize(image: string, declared: number, limits: ImageLimits): void {
  if (declared > limits.maxDownloadBytes) {
    throw new ImageError(
      'too-large',
      `${image} has ${formatBytes(declared)} of layers to download, more than the ${formatBytes(limits.maxDownloadBytes)} this host allows for one image (PIER_IMAGE_MAX_DOWNLOAD_GB).`,
    );
  }
}

/** The running count of one image's unpack; each charge throws `too-large` past a cap. */
export class UnpackBudget {
  private bytes = 0;
  private entries = 0;
  private stream = 0;
  private readonly maxStream: number;

  constructor(
    private readonly image: string,
    private readonly limits: ImageLimits,
  ) {
    this.maxStream =
      limits.maxUnpackedBytes + limits.maxEntries * TAR_OVERHEAD_PER_ENTRY + TAR_OVERHEAD;
  }

  /** One more entry (or `n`) read from a layer. */
  entry(n = 1): void {
    this.entries += n;
    if (this.entries > this.limits.maxEntries) {
      throw new ImageError(
        'too-large',
        `${this.image} has more than ${this.limits.maxEntries.toLocaleString('en-US')} files, directories and links, this host's cap on one image (PIER_IMAGE_MAX_ENTRIES).`,
      );
    }
  }

  /** A regular file of `size` bytes (its header's size) about to be written. */
  file(size: number): void {
    this.bytes += size;
    if (this.bytes > this.limits.maxUnpackedBytes) {
      throw new ImageError(
        'too-large',
        `${this.image} unpacks to more than ${formatBytes(this.limits.maxUnpackedBytes)}, this host's cap on one image (PIER_IMAGE_MAX_UNPACKED_GB).`,
      );
    }
  }

  /** Uncompressed tar bytes read from a layer. */
  tar(n: number): void {
    this.stream += n;
    if (this.stream > this.maxStream) {
      throw new ImageError(
        'too-large',
        `${this.image} has more than ${formatBytes(this.maxStream)} of uncompressed layer data, past what this host's caps on one image allow (PIER_IMAGE_MAX_UNPACKED_GB, PIER_IMAGE_MAX_ENTRIES).`,
      );
    }
  }
}
