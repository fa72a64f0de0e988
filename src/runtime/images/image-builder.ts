/**
 * Turns a verified platform manifest into an image on disk: the config and layers into
 * the blob cache (each blob downloaded once, even when several images want it at the
 * same time), the layers applied in order into a new root, and the record written last.
 * Layers download a few at a time while earlier ones are already being applied.
 *
 * Every image is held to the host's caps (limits.ts): its declared downloads before the
 * first blob is fetched, its entries and unpacked bytes while the layers stream. An image
 * refused for its size leaves nothing: the temp root goes (roots.ts), and so do the blobs
 * and manifests it brought that no other image or build uses.
 */
import { imageOwner } from '../sandbox/userns.js';
import type { BlobCache, BlobProgress } from './blob-cache.js';
import { ImageError } from './errors.js';
import { parseImageConfig } from './image-config.js';
import { checkDownloadSize, formatBytes, UnpackBudget, type ImageLimits } from './limits.js';
import type { Descriptor, ImageManifest, Platform } from './manifest.js';
import { assertRunsHere } from './platform.js';
import type { ImageRecord, ImageRecords } from './records.js';
import type { BlobSource } from './layout-source.js';
import { treeSize, type RootDirs } from './roots.js';
import { SharedWork } from './shared-work.js';
import { applyLayer } from './unpack-layer.js';

/** What the builder works with (the store's parts). */
export interface BuilderParts {
  blobs: BlobCache;
  roots: RootDirs;
  records: ImageRecords;
  host: Platform;
  /** Layers downloaded at once. */
  concurrency: number;
  /** The caps on one image. */
  limits: ImageLimits;
  log?: { warn(obj: object, msg: string): void };
}

/** One image to build: where from, and the manifests that lead to it. */
export interface BuildJob {
  /** A registry, or a local OCI layout (an image pier built). */
  client: BlobSource;
  /** The canonical reference, for messages and the record. */
  name: string;
  /** The platform manifest's digest. */
  digest: string;
  manifest: ImageManifest;
  /** The index (if any) and the manifest, to keep their blobs with the image. */
  manifests: string[];
}

/** The largest config pier reads (into memory); real ones are a few KiB. */
const MAX_CONFIG = 4 * 1024 * 1024;

/** Builds images; one per store. */
export class ImageBuilder {
  private readonly downloads = new SharedWork<void, BlobProgress>();
  /** Blobs that work in progress relies on, with how many builds rely on each. */
  private readonly pinned = new Map<string, number>();

  constructor(private readonly parts: BuilderParts) {}

  /** Blobs garbage collection must leave alone right now. */
  pinnedDigests(): string[] {
    return [...this.pinned.keys()];
  }

  /** Downloads the config and layers (unless present), unpacks, and records the image. */
  async build(
    job: BuildJob,
    signal: AbortSignal,
    progress: (p: BlobProgress) => void,
  ): Promise<ImageRecord> {
    const { blobs, roots, records, host } = this.parts;
    const { manifest, name, digest } = job;
    const blobDigests = [manifest.config.digest, ...manifest.layers.map((l) => l.digest)];
    this.pin(blobDigests, 1);
    let refused = false;
    try {
      // Declared sizes are what the blobs will be (blob-cache.ts refuses a byte more).
      const declared = manifest.layers.reduce((sum, l) => sum + l.size, manifest.config.size);
      checkDownloadSize(name, declared, this.parts.limits);
      if (manifest.config.size > MAX_CONFIG) {
        throw new ImageError(
          'too-large',
          `The config of ${name} is ${formatBytes(manifest.config.size)}, more than the ${formatBytes(MAX_CONFIG)} pier reads.`,
        );
      }
      await this.fetchBlob(job.client, manifest.config, signal);
      const parsed = parseImageConfig(await blobs.read(manifest.config.digest), name);
      assertRunsHere(parsed, host, name);
      if (parsed.diffIds.length !== manifest.layers.length) {
        throw new ImageError(
          'unsupported',
          `The config of ${name} lists ${parsed.diffIds.length} layers but its manifest has ${manifest.layers.length}.`,
        );
      }
      // A root without a record: a crash came between the two. The root is whole (it was
      // renamed into place complete), so only the record is missing.
      if (!(await roots.exists(digest))) await this.unpack(job, parsed.diffIds, signal, progress);
      // Another index may have led to this image before: keep its blob counted as ours.
      const earlier = (await records.get(digest))?.manifests ?? [];
      const record: ImageRecord = {
        version: 1,
        digest,
        ref: name,
        config: parsed.config,
        sizeBytes: await treeSize(roots.path(digest)),
        manifests: [...new Set([...earlier, ...job.manifests])],
        blobs: blobDigests,
        pulledAt: new Date().toISOString(),
      };
      await records.put(record);
      return record;
    } catch (err) {
      refused = err instanceof ImageError && err.code === 'too-large';
      throw err;
    } finally {
      this.pin(blobDigests, -1);
      // Never in place of the refusal: a failed cleanup is only logged.
      if (refused) {
        await this.discard([...job.manifests, ...blobDigests]).catch((err: unknown) =>
          this.parts.log?.warn({ digest, err }, 'blobs of a refused image not removed'),
        );
      }
    }
  }

  /**
   * Removes the blobs of a refused image that nothing else holds: no image record lists
   * them and no build in progress relies on them.
   */
  private async discard(digests: string[]): Promise<void> {
    const { blobs, records } = this.parts;
    const keep = new Set(this.pinned.keys());
    for (const r of await records.all()) for (const d of [...r.blobs, ...r.manifests]) keep.add(d);
    for (const d of new Set(digests)) if (!keep.has(d)) await blobs.remove(d);
  }

  /** Downloads layers (a few at a time) and applies each, in order, as soon as it is in. */
  private async unpack(
    job: BuildJob,
    diffIds: string[],
    signal: AbortSignal,
    progress: (p: BlobProgress) => void,
  ): Promise<void> {
    const { layers } = job.manifest;
    const controller = new AbortController();
    const inner = AbortSignal.any([signal, controller.signal]);
    const next = limiter(this.parts.concurrency);
    const downloads = layers.map((l) => next(() => this.fetchBlob(job.client, l, inner, progress)));
    for (const d of downloads) d.catch(() => undefined);
    let skipped = 0;
    const budget = new UnpackBudget(job.name, this.parts.limits);
    try {
      await this.parts.roots.build(job.digest, async (tmp) => {
        for (const [i, layer] of layers.entries()) {
          await downloads[i];
          const r = await applyLayer(this.parts.blobs.path(layer.digest), {
            root: tmp,
            layer: layer.digest,
            diffId: diffIds[i]!,
            signal: inner,
            budget,
            // Owned by the machines' id range, as machine root sees them as its own.
            owner: imageOwner,
          });
          skipped += r.skipped;
        }
      });
    } catch (err) {
      controller.abort(err);
      await Promise.allSettled(downloads);
      throw err;
    }
    if (skipped > 0) {
      this.parts.log?.warn(
        { digest: job.digest, skipped },
        'image entries skipped (devices, FIFOs, unknown types)',
      );
    }
  }

  /** Makes sure a blob is in the cache; concurrent requests for one blob share a download. */
  private fetchBlob(
    client: BlobSource,
    desc: Descriptor,
    signal: AbortSignal,
    progress?: (p: BlobProgress) => void,
  ): Promise<void> {
    const { blobs } = this.parts;
    return this.downloads.run(
      desc.digest,
      async (s, p) => {
        if (await blobs.has(desc.digest, desc.size)) {
          p({ layer: desc.digest, bytes: desc.size, total: desc.size });
          return;
        }
        const answer = await client.blob(desc.digest, s);
        const what = `A blob of ${client.registry}/${client.repository}`;
        await blobs.download(desc.digest, desc.size, answer, what, p);
      },
      { signal, ...(progress ? { onProgress: progress } : {}) },
    );
  }

  private pin(digests: string[], delta: 1 | -1): void {
    for (const d of digests) {
      const n = (this.pinned.get(d) ?? 0) + delta;
      if (n > 0) this.pinned.set(d, n);
      else this.pinned.delete(d);
    }
  }
}

/** Runs at most `n` of the given tasks at once, in the order they were handed in. */
function limiter(n: number): <T>(task: () => Promise<T>) => Promise<T> {
  let active = 0;
  const waiting: (() => void)[] = [];
  return async <T>(task: () => Promise<T>): Promise<T> => {
    if (active < n) active++;
    else await new Promise<void>((resolve) => waiting.push(resolve)); // the slot is handed over
    try {
      return await task();
    } finally {
      const nextInLine = waiting.shift();
      if (nextInLine) nextInLine();
      else active--;
    }
  };
}
