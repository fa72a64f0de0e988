/**
 * ImageStore: pulls OCI images from registries and keeps them unpacked on disk, one root
 * per manifest digest, ready to be a machine's overlay lower dir.
 *
 * Layout of `dir` (mode 0700):
 *   blobs/sha256/<hex>   manifests, configs and layers, verified (blob-cache.ts)
 *   roots/<hex>/         unpacked roots, by platform manifest digest (roots.ts)
 *   images/<hex>.json    one record per pulled image (records.ts)
 *
 * A pull by tag costs one HEAD request when the tag still names an image we have; a pull
 * by digest of an image we have costs nothing. Concurrent pulls of one reference share
 * everything; concurrent pulls of different references to one image share the download
 * and unpack; a layer shared by two images is downloaded once.
 *
 * Every pull is held to the host's caps on one image (`limits`, limits.ts): compressed
 * download, unpacked bytes, entries. One past a cap fails as `too-large` and leaves
 * nothing behind.
 */
import { mkdir } from 'node:fs/promises';
import type { OutboundGuard } from '../../host/outbound-guard.js';
import type { Credentials } from './auth.js';
import { BlobCache, type BlobProgress } from './blob-cache.js';
import { ImageError } from './errors.js';
import { type FetchLike } from './http.js';
import { ImageBuilder } from './image-builder.js';
import type { ImageConfig } from './image-config.js';
import { imageLimits, type ImageLimits } from './limits.js';
import { assertSha256, parseManifest } from './manifest.js';
import { hostPlatform, selectManifest } from './platform.js';
import { ImageRecords, type ImageRecord } from './records.js';
import { formatReference, parseReference, type ImageReference } from './reference.js';
import { RegistryClient } from './registry-client.js';
import { LayoutSource, writeLinkedLayout } from './layout-source.js';
import { RootDirs } from './roots.js';
import { SharedWork } from './shared-work.js';

/** Options of {@link ImageStore}. */
export interface ImageStoreOptions {
  /** Where blobs, roots and records live; created (0700) when missing. */
  dir: string;
  log?: { info(obj: object, msg: string): void; warn(obj: object, msg: string): void };
  /**
   * The outbound guard every registry request goes through (registry, token realm,
   * redirects): built by the platform from PIER_ALLOW_PRIVATE_TARGETS and
   * PIER_TRUSTED_REGISTRIES. Required, so that no store can pull unguarded by accident.
   */
  guard: OutboundGuard;
  /**
   * The transport in place of `guard.fetch`: tests only (to count or fail requests; those
   * that connect wrap `guard.fetch`, so the guard still runs).
   */
  fetch?: FetchLike;
  /** Credentials for a registry host (`docker.io`, `ghcr.io`, `localhost:5000`), if any. */
  credentials?: (registry: string) => Credentials | undefined;
  /** How long a registry may stay silent before a request fails as `unreachable`. 30 s. */
  timeoutMs?: number;
  /** Layers downloaded at once. 3. */
  concurrency?: number;
  /**
   * The caps on one image (the operator's PIER_IMAGE_MAX_* settings, handed down by the
   * platform); what is not given takes the defaults of config.ts.
   */
  limits?: Partial<ImageLimits>;
}

/** Options of one {@link ImageStore.pull}. */
export interface PullOptions {
  signal?: AbortSignal;
  /** Download progress of each layer (`layer` is its digest). */
  onProgress?: (p: BlobProgress) => void;
}

/** An image on disk, ready to run. */
export interface PulledImage {
  /** The canonical reference it was pulled as (`docker.io/library/busybox:latest`). */
  ref: string;
  /** The digest of the platform manifest the root was unpacked from (not of an index). */
  digest: string;
  /** The unpacked root. Never write into it: mount it as an overlay lower dir. */
  rootfs: string;
  config: ImageConfig;
  /** Bytes of the regular files in the root (hard links counted once). */
  sizeBytes: number;
}

const MAX_STORED_MANIFEST = 4 * 1024 * 1024;

/** Pulls, keeps and removes images. Safe to share within one process. */
export class ImageStore {
  private readonly blobs: BlobCache;
  private readonly records: ImageRecords;
  private readonly roots: RootDirs;
  private readonly host = hostPlatform();
  private readonly fetchFn: FetchLike;
  private readonly timeoutMs: number;
  private readonly builder: ImageBuilder;
  private readonly clients = new Map<string, RegistryClient>();
  /** Pulls in progress, by canonical reference. */
  private readonly pulls = new SharedWork<PulledImage, BlobProgress>();
  /** Builds in progress, by platform manifest digest. */
  private readonly builds = new SharedWork<ImageRecord, BlobProgress>();
  private ready: Promise<void> | undefined;

  constructor(private readonly opts: ImageStoreOptions) {
    this.blobs = new BlobCache(opts.dir);
    this.records = new ImageRecords(opts.dir);
    this.roots = new RootDirs(opts.dir);
    this.fetchFn = opts.fetch ?? ((url, init) => opts.guard.fetch(url, init));
    this.timeoutMs = opts.timeoutMs ?? 30_000;
    this.builder = new ImageBuilder({
      blobs: this.blobs,
      roots: this.roots,
      records: this.records,
      host: this.host,
      concurrency: Math.max(1, opts.concurrency ?? 3),
      limits: imageLimits(opts.limits),
      ...(opts.log ? { log: opts.log } : {}),
    });
  }

  /** Makes the directories and sweeps what a crash left half done; once per store. */
  private init(): Promise<void> {
    this.ready ??= (async () => {
      await mkdir(this.opts.dir, { recursive: true, mode: 0o700 });
      await Promise.all([this.blobs.init(), this.records.init(), this.roots.init()]);
    })().catch((err: unknown) => {
      this.ready = undefined;
      throw err;
    });
    return this.ready;
  }

  /**
   * Pulls `ref` (unless the registry says the tag still names an image we have) and
   * returns it unpacked. Errors are ImageError, except the caller's abort, which
   * rejects with the signal's reason.
   */
  async pull(ref: string, opts: PullOptions = {}): Promise<PulledImage> {
    const parsed = parseReference(ref);
    const name = formatReference(parsed);
    return this.pulls.run(
      name,
      (signal, progress) => this.pullOnce(parsed, name, signal, progress),
      opts,
    );
  }

  /**
   * Takes the image of a local OCI layout (`dir`, one manifest) into the store, unpacked
   * once under its manifest digest like a pulled image, and recorded as `name`. Blobs are
   * verified and the image held to the same caps as a pull. How builds become images.
   */
  async importLayout(dir: string, name: string, opts: PullOptions = {}): Promise<PulledImage> {
    await this.init();
    const source = new LayoutSource(dir, name);
    const { digest, body } = await source.manifest();
    const have = await this.lookup(digest);
    if (have) return this.toPulled(have, name);
    const doc = parseManifest(body, null, name);
    if (doc.kind !== 'manifest') {
      throw new ImageError('unsupported', `${name} is an index, not one image.`);
    }
    await this.blobs.writeVerified(digest, body);
    const job = { client: source, name, digest, manifest: doc.manifest, manifests: [digest] };
    const record = await this.builds.run(digest, (s, p) => this.builder.build(job, s, p), opts);
    return this.toPulled(record, name);
  }

  /**
   * Writes an OCI layout at `dir` whose one manifest is the stored image `digest`, its
   * blobs linked (not copied) from the store: how a builder is handed a base image that
   * pier pulled through its own guard. Undefined when the image is not in the store.
   */
  async exportLayout(digest: string, dir: string): Promise<boolean> {
    await this.init();
    const record = await this.lookup(digest);
    if (!record) return false;
    const manifest = await this.blobs.read(record.digest);
    const mediaType = (JSON.parse(manifest.toString('utf8')) as { mediaType?: string }).mediaType;
    await writeLinkedLayout(dir, {
      digest: record.digest,
      size: manifest.length,
      mediaType: mediaType ?? 'application/vnd.oci.image.manifest.v1+json',
      blobs: [record.digest, ...record.blobs].map((d) => ({ digest: d, file: this.blobs.path(d) })),
    });
    return true;
  }

  /** The image with this manifest (or index) digest, if it is on disk. Never uses the network. */
  async get(digest: string): Promise<PulledImage | undefined> {
    await this.init();
    const record = await this.lookup(digest);
    return record && this.toPulled(record, record.ref);
  }

  /**
   * Removes an image's root and record, and the blobs no other image uses. Waits for a
   * pull of the same image in progress. The caller makes sure no machine still runs on it.
   */
  async remove(digest: string): Promise<void> {
    await this.init();
    const record = await this.lookup(digest);
    if (!record) return;
    await this.builds.settled(record.digest);
    await this.records.remove(record.digest);
    await this.roots.remove(record.digest);
    const keep = new Set(this.builder.pinnedDigests());
    for (const r of await this.records.all())
      for (const d of [...r.blobs, ...r.manifests]) keep.add(d);
    for (const d of [...record.blobs, ...record.manifests])
      if (!keep.has(d)) await this.blobs.remove(d);
    this.opts.log?.info({ digest: record.digest }, 'image removed');
  }

  private client(ref: ImageReference): RegistryClient {
    const key = `${ref.registry}/${ref.repository}`;
    let c = this.clients.get(key);
    if (!c) {
      const credentials = this.opts.credentials;
      c = new RegistryClient(ref.registry, ref.repository, {
        fetch: this.fetchFn,
        timeoutMs: this.timeoutMs,
        ...(credentials ? { credentials: () => credentials(ref.registry) } : {}),
      });
      this.clients.set(key, c);
    }
    return c;
  }

  private toPulled(record: ImageRecord, ref: string): PulledImage {
    return {
      ref,
      digest: record.digest,
      rootfs: this.roots.path(record.digest),
      config: record.config,
      sizeBytes: record.sizeBytes,
    };
  }

  private async pullOnce(
    ref: ImageReference,
    name: string,
    signal: AbortSignal,
    progress: (p: BlobProgress) => void,
  ): Promise<PulledImage> {
    await this.init();
    const started = Date.now();
    const client = this.client(ref);
    let top = ref.digest;
    if (!top) {
      top = await client.resolve(ref.tag!, signal);
      // No digest header: fetch the manifest by tag and take the digest of its bytes.
      top ??= (await client.manifest(ref.tag!, signal)).digest;
    }
    const have = await this.lookup(top);
    if (have) {
      if (have.ref !== name) await this.records.put({ ...have, ref: name });
      return this.toPulled(have, name);
    }

    // By digest from here on: the tag may move meanwhile, the digest cannot.
    const fetched = await client.manifest(top, signal);
    let doc = parseManifest(fetched.body, fetched.contentType, name);
    await this.blobs.writeVerified(top, fetched.body);
    const manifests = [top];
    if (doc.kind === 'index') {
      const chosen = selectManifest(doc.index, this.host, name);
      assertSha256(chosen.digest, `The ${this.host.architecture} image of ${name}`);
      const m = await client.manifest(chosen.digest, signal);
      doc = parseManifest(m.body, m.contentType, name);
      if (doc.kind !== 'manifest') {
        throw new ImageError(
          'unsupported',
          `${name} is an index of indexes, which is not supported.`,
        );
      }
      await this.blobs.writeVerified(chosen.digest, m.body);
      manifests.push(chosen.digest);
    }
    const digest = manifests[manifests.length - 1]!;
    const manifest = doc.manifest;
    const job = { client, name, digest, manifest, manifests };
    const record = await this.builds.run(digest, (s, p) => this.builder.build(job, s, p), {
      signal,
      onProgress: progress,
    });
    this.opts.log?.info(
      { ref: name, digest, sizeBytes: record.sizeBytes, ms: Date.now() - started },
      'image pulled',
    );
    return this.toPulled(record, name);
  }

  /** The complete image a manifest or index digest names, from local state only. */
  private async lookup(digest: string): Promise<ImageRecord | undefined> {
    if (!/^sha256:[a-f0-9]{64}$/.test(digest)) return undefined;
    let record = await this.records.get(digest);
    const size = record ? undefined : await this.blobs.size(digest);
    // Maybe an index we stored: the image is then the one for this host. (The size check
    // keeps us from reading a layer into memory when someone asks for its digest.)
    if (size !== undefined && size <= MAX_STORED_MANIFEST) {
      try {
        const doc = parseManifest(await this.blobs.read(digest), null, digest);
        if (doc.kind === 'index') {
          record = await this.records.get(selectManifest(doc.index, this.host, digest).digest);
        }
      } catch {
        record = undefined; // not a manifest (a layer or config), or no image for this host
      }
    }
    return record && (await this.roots.exists(record.digest)) ? record : undefined;
  }
}
