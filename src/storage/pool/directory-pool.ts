/**
 * The pool for hosts without btrfs (not root, no loop devices, no btrfs-progs): plain
 * directories under `<dir>/volumes`. A snapshot is a full copy (`cp -a --reflink=auto`,
 * which is instant on filesystems that can share extents, such as XFS with reflink, and a
 * byte copy elsewhere), so its time grows with the volume. Quotas and read-only snapshots
 * are not enforced: `quotaBytes` reads null, and capacity must be watched through usage().
 * A copy of a volume that is being written is not a consistent point in time; the caller
 * stops or checkpoints writers first.
 */
import { chmod, chown, lstat, mkdir, readdir, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import { diskUsage, filesystemSpace } from './disk-usage.js';
import { NameLocks } from './name-lock.js';
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
import { runTool } from './run.js';
import { buildingName, isLeftover, trashName } from './temp-names.js';

/** A pool of plain directories. */
export class DirectoryPool implements StoragePool {
  readonly kind = 'directory' as const;
  private readonly locks = new NameLocks();
  private closed = false;

  private constructor(readonly root: string) {}

  /** Opens (creating if needed) the pool at `<dir>/volumes` and clears leftovers of a crash. */
  static async open(opts: { dir: string }): Promise<DirectoryPool> {
    await mkdir(opts.dir, { recursive: true, mode: 0o711 });
    const root = path.join(path.resolve(opts.dir), 'volumes');
    await mkdir(root, { recursive: true, mode: 0o711 });
    for (const entry of await readdir(root)) {
      if (isLeftover(entry)) await rm(path.join(root, entry), { recursive: true, force: true });
    }
    return new DirectoryPool(root);
  }

  async create(name: string, opts: CreateVolumeOptions = {}): Promise<VolumeInfo> {
    checkName(name);
    checkQuota(opts.quotaBytes);
    this.checkOpen();
    return this.locks.with([name], async () => {
      await mustNotExist(this.pathOf(name), name);
      const temp = path.join(this.root, buildingName(name));
      try {
        await mkdir(temp, { mode: 0o700 });
        await chmod(temp, 0o700); // mkdir's mode is cut by the umask
        if (opts.owner) await chown(temp, opts.owner.uid, opts.owner.gid);
        await rename(temp, this.pathOf(name));
      } catch (err) {
        await rm(temp, { recursive: true, force: true });
        throw asPoolError(err);
      }
      return { name, path: this.pathOf(name), quotaBytes: null, usedBytes: 0 };
    });
  }

  async snapshot(source: string, name: string, opts: SnapshotOptions = {}): Promise<VolumeInfo> {
    checkName(source);
    checkName(name);
    checkQuota(opts.quotaBytes);
    this.checkOpen();
    return this.locks.with([source, name], async () => {
      if (!(await this.exists(source))) {
        throw new PoolError('not-found', `volume ${source} does not exist`);
      }
      await mustNotExist(this.pathOf(name), name);
      const temp = path.join(this.root, buildingName(name));
      try {
        // -a keeps owners, modes, links and times; -T copies the directory itself to temp.
        await runTool('cp', ['-a', '--reflink=auto', '-T', this.pathOf(source), temp], {
          timeoutMs: 24 * 3_600_000,
        });
        await rename(temp, this.pathOf(name));
      } catch (err) {
        await rm(temp, { recursive: true, force: true });
        throw asPoolError(err);
      }
      return (await this.info(name)) ?? notFound(name);
    });
  }

  async destroy(name: string): Promise<void> {
    checkName(name);
    this.checkOpen();
    await this.locks.with([name], async () => {
      // Renamed away first: the name is free at once, and a crash halfway through the
      // removal leaves a leftover that the next open clears, not half a volume.
      const trash = path.join(this.root, trashName(name));
      try {
        await rename(this.pathOf(name), trash);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
        throw asPoolError(err);
      }
      await rm(trash, { recursive: true, force: true });
    });
  }

  /** Quotas are not enforced here; this only checks that the volume exists. */
  async setQuota(name: string, quotaBytes: number | null): Promise<void> {
    checkName(name);
    checkQuota(quotaBytes);
    this.checkOpen();
    if (!(await this.exists(name)))
      throw new PoolError('not-found', `volume ${name} does not exist`);
  }

  async info(name: string): Promise<VolumeInfo | undefined> {
    checkName(name);
    this.checkOpen();
    if (!(await this.exists(name))) return undefined;
    const p = this.pathOf(name);
    const usedBytes = await diskUsage(p).catch(() => null);
    return { name, path: p, quotaBytes: null, usedBytes };
  }

  async list(): Promise<string[]> {
    this.checkOpen();
    const entries = await readdir(this.root, { withFileTypes: true });
    return entries
      .filter((e) => e.isDirectory() && VOLUME_NAME.test(e.name))
      .map((e) => e.name)
      .sort();
  }

  async usage(): Promise<PoolUsage> {
    this.checkOpen();
    return { kind: this.kind, ...(await filesystemSpace(this.root)) };
  }

  async close(): Promise<void> {
    this.closed = true;
  }

  private pathOf(name: string): string {
    return path.join(this.root, name);
  }

  private checkOpen(): void {
    if (this.closed) throw new PoolError('backend', 'the storage pool is closed');
  }

  private async exists(name: string): Promise<boolean> {
    try {
      return (await lstat(this.pathOf(name))).isDirectory();
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
      throw err;
    }
  }
}

function notFound(name: string): never {
  throw new PoolError('not-found', `volume ${name} vanished while it was made`);
}
