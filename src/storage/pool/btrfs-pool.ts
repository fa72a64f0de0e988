/**
 * The btrfs pool: each volume is a subvolume, its size limit a qgroup limit on referenced
 * bytes, and a snapshot a copy-on-write subvolume snapshot, which takes the same few
 * milliseconds whatever the size. When the data dir is itself on btrfs the volumes sit in
 * `<dir>/volumes`; otherwise the pool is an image file `<dir>/pool.img` loop-mounted at
 * `<dir>/mnt` (see pool-image.ts). Needs root (subvolume deletion, quotas, mounting).
 *
 * A snapshot of a volume that is being written is crash-consistent: it holds exactly what
 * a power cut at that instant would have left, which PostgreSQL and Redis recover from.
 */
import { chmod, chown, lstat, mkdir, opendir, readdir, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import {
  createSubvolume,
  deleteSubvolume,
  enableQuota,
  isOnBtrfs,
  isSubvolume,
  limitQgroup,
  qgroupOf,
  snapshotSubvolume,
  sweepStaleQgroups,
} from './btrfs-cli.js';
import { filesystemSpace } from './disk-usage.js';
import { NameLocks } from './name-lock.js';
import { closeImage, mountImage, type MountedImage } from './pool-image.js';
import {
  asPoolError,
  checkName,
  checkQuota,
  PoolError,
  type CreateVolumeOptions,
  type PoolUsage,
  type SnapshotOptions,
  type StoragePool,
  type VolumeInfo,
  VOLUME_NAME,
  mustNotExist,
} from './pool.js';
import { ToolError } from './run.js';
import { buildingName, isLeftover } from './temp-names.js';

/** Size of a new pool image: sparse, so it costs only what is written into it. */
export const DEFAULT_IMAGE_SIZE_BYTES = 64 * 1024 ** 3;

/** Options of {@link BtrfsPool.open}. */
export interface BtrfsPoolOptions {
  /** The pool's directory in the data dir, e.g. `<dataDir>/pool`. */
  dir: string;
  /** Size of the image when one is created (not used when `dir` is on btrfs, nor on reopen). */
  imageSizeBytes?: number;
}

/** A pool of btrfs subvolumes. */
export class BtrfsPool implements StoragePool {
  readonly kind = 'btrfs' as const;
  private readonly locks = new NameLocks();
  private closed = false;

  private constructor(
    readonly root: string,
    private readonly dir: string,
    /** The loop-mounted image, or undefined when the data dir is on btrfs itself. */
    private readonly image: MountedImage | undefined,
  ) {}

  /** The image file holding the pool, or undefined when the pool sits on the host's btrfs. */
  get imagePath(): string | undefined {
    return this.image?.image;
  }

  /**
   * Opens the pool, creating and formatting its image only the first time; an image that
   * is still mounted (or attached) from an earlier process is taken back as it is.
   */
  static async open(opts: BtrfsPoolOptions): Promise<BtrfsPool> {
    const dir = path.resolve(opts.dir);
    await mkdir(dir, { recursive: true, mode: 0o711 });
    let image: MountedImage | undefined;
    let root: string;
    if (await isOnBtrfs(dir)) {
      root = path.join(dir, 'volumes');
      await mkdir(root, { recursive: true, mode: 0o711 });
    } else {
      image = await mountImage({
        image: path.join(dir, 'pool.img'),
        mountPoint: path.join(dir, 'mnt'),
        sizeBytes: opts.imageSizeBytes ?? DEFAULT_IMAGE_SIZE_BYTES,
      });
      root = image.mountPoint;
    }
    const pool = new BtrfsPool(root, dir, image);
    try {
      await enableQuota(root);
      await pool.clearLeftovers();
    } catch (err) {
      if (image) await closeImage(image).catch(() => undefined);
      throw err;
    }
    await pool.sweepQgroups();
    return pool;
  }

  async create(name: string, opts: CreateVolumeOptions = {}): Promise<VolumeInfo> {
    checkName(name);
    checkQuota(opts.quotaBytes);
    this.checkOpen();
    return this.locks.with([name], async () => {
      await mustNotExist(this.pathOf(name), name);
      // Built under a temporary name and renamed into place, so that a crash never leaves
      // a volume without its limit or owner: only a leftover that the next open clears.
      const temp = path.join(this.root, buildingName(name));
      try {
        await createSubvolume(temp);
        if (opts.quotaBytes !== undefined) await limitQgroup(temp, opts.quotaBytes);
        await chmod(temp, 0o700);
        if (opts.owner) await chown(temp, opts.owner.uid, opts.owner.gid);
        await rename(temp, this.pathOf(name));
      } catch (err) {
        await this.removeTree(temp).catch(() => undefined);
        throw asPoolError(err);
      }
      return this.infoOf(name);
    });
  }

  /** The copy keeps the source's limit unless `quotaBytes` is given (the kernel copies it). */
  async snapshot(source: string, name: string, opts: SnapshotOptions = {}): Promise<VolumeInfo> {
    checkName(source);
    checkName(name);
    checkQuota(opts.quotaBytes);
    this.checkOpen();
    return this.locks.with([source, name], async () => {
      if (!(await this.isVolume(source))) {
        throw new PoolError('not-found', `volume ${source} does not exist`);
      }
      await mustNotExist(this.pathOf(name), name);
      const temp = path.join(this.root, buildingName(name));
      try {
        await snapshotSubvolume(this.pathOf(source), temp, opts.readOnly ?? false);
        if (opts.quotaBytes !== undefined) await limitQgroup(temp, opts.quotaBytes);
        await rename(temp, this.pathOf(name));
      } catch (err) {
        await this.removeTree(temp).catch(() => undefined);
        throw asPoolError(err);
      }
      return this.infoOf(name);
    });
  }

  async destroy(name: string): Promise<void> {
    checkName(name);
    this.checkOpen();
    const removed = await this.locks.with([name], async () => {
      try {
        await lstat(this.pathOf(name));
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
        throw asPoolError(err);
      }
      await this.removeTree(this.pathOf(name)).catch((err: unknown) => {
        throw asPoolError(err);
      });
      return true;
    });
    if (removed) await this.sweepQgroups();
  }

  async setQuota(name: string, quotaBytes: number | null): Promise<void> {
    checkName(name);
    checkQuota(quotaBytes);
    this.checkOpen();
    await this.locks.with([name], async () => {
      if (!(await this.isVolume(name))) {
        throw new PoolError('not-found', `volume ${name} does not exist`);
      }
      await limitQgroup(this.pathOf(name), quotaBytes);
    });
  }

  async info(name: string): Promise<VolumeInfo | undefined> {
    checkName(name);
    this.checkOpen();
    if (!(await this.isVolume(name))) return undefined;
    return this.infoOf(name);
  }

  async list(): Promise<string[]> {
    this.checkOpen();
    const names = (await readdir(this.root)).filter((n) => VOLUME_NAME.test(n));
    const volumes: string[] = [];
    for (const n of names) if (await this.isVolume(n)) volumes.push(n);
    return volumes.sort();
  }

  /** statfs of the pool; for an image, free space is also capped by the disk under it. */
  async usage(): Promise<PoolUsage> {
    this.checkOpen();
    const own = await filesystemSpace(this.root);
    if (!this.image) return { kind: this.kind, ...own };
    // The image is sparse: btrfs may believe it has room that the disk below lacks.
    const below = await filesystemSpace(this.dir);
    return { kind: this.kind, ...own, freeBytes: Math.min(own.freeBytes, below.freeBytes) };
  }

  /** Unmounts the image and frees its loop device; fails if a volume is still in use. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    try {
      if (this.image) await closeImage(this.image);
    } catch (err) {
      this.closed = false; // still mounted: the caller may free the volume and try again
      throw err;
    }
  }

  private pathOf(name: string): string {
    return path.join(this.root, name);
  }

  private checkOpen(): void {
    if (this.closed) throw new PoolError('backend', 'the storage pool is closed');
  }

  private async infoOf(name: string): Promise<VolumeInfo> {
    const p = this.pathOf(name);
    const q = await qgroupOf(p);
    return {
      name,
      path: p,
      quotaBytes: q?.maxReferenced ?? null,
      usedBytes: q?.referenced ?? null,
    };
  }

  private async isVolume(name: string): Promise<boolean> {
    try {
      return await isSubvolume(this.pathOf(name));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
      throw err;
    }
  }

  /**
   * Removes a subvolume, or a plain directory (a leftover that never became one). A
   * subvolume that someone made inside a volume blocks its deletion ("Directory not
   * empty"), so those are removed first.
   */
  private async removeTree(p: string): Promise<void> {
    if (!(await isSubvolume(p))) {
      await rm(p, { recursive: true, force: true });
      return;
    }
    try {
      await deleteSubvolume(p);
    } catch (err) {
      if (!(err instanceof ToolError && /not empty/i.test(err.stderr))) throw err;
      for (const nested of await nestedSubvolumes(p)) await this.removeTree(nested);
      await deleteSubvolume(p);
    }
  }

  /** Clears what an interrupted create, snapshot or destroy left in the root. */
  private async clearLeftovers(): Promise<void> {
    for (const entry of await readdir(this.root)) {
      if (isLeftover(entry)) await this.removeTree(path.join(this.root, entry));
    }
  }

  /**
   * Stale qgroups are swept only in an image the pool owns whole: on a host's own btrfs
   * they may belong to someone else's bookkeeping.
   */
  private async sweepQgroups(): Promise<void> {
    if (this.image) await sweepStaleQgroups(this.root).catch(() => 0);
  }
}

/**
 * Subvolumes directly inside the subvolume at `top` (at any depth of directories, but not
 * inside other subvolumes: those are found when that one is removed). A subvolume's
 * top directory has its own device number and inode 256.
 */
async function nestedSubvolumes(top: string): Promise<string[]> {
  const topDev = (await lstat(top)).dev;
  const found: string[] = [];
  const walk = async (dir: string): Promise<void> => {
    for await (const entry of await opendir(dir)) {
      if (!entry.isDirectory()) continue;
      const p = path.join(dir, entry.name);
      const st = await lstat(p);
      if (st.dev === topDev) await walk(p);
      else if (await isSubvolume(p)) found.push(p);
      // anything else on another device is a mount: not ours to walk into
    }
  };
  await walk(top);
  return found;
}
