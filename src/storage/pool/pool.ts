/**
 * The storage pool: where customer data (database directories, machine volumes) lives, as
 * named volumes that can be created, snapshotted and destroyed. Two implementations sit
 * behind this interface: btrfs (subvolumes with quotas, copy-on-write snapshots) where the
 * host allows it, and plain directories (full copies, no quota) where it does not. A
 * service never knows which one it has; `kind` is there for capacity reports only.
 */
import { lstat } from 'node:fs/promises';
import { constants } from 'node:os';

/** A volume as the pool sees it. */
export interface VolumeInfo {
  name: string;
  /** Absolute path of the volume's top directory; hand this to the database or machine. */
  path: string;
  /** The enforced size limit, or null when there is none (always null for directories). */
  quotaBytes: number | null;
  /**
   * Bytes the volume refers to, or null when unknown. On btrfs this is the qgroup's
   * referenced count, which is updated at transaction commit (up to ~30 s behind writes)
   * and counts data shared with snapshots in full.
   */
  usedBytes: number | null;
}

/** Options of {@link StoragePool.create}. */
export interface CreateVolumeOptions {
  /** Size limit in bytes (btrfs: a qgroup limit on referenced bytes; directories: ignored). */
  quotaBytes?: number;
  /** Owner of the volume's top directory, which is made mode 0700. Default: root. */
  owner?: { uid: number; gid: number };
}

/** Options of {@link StoragePool.snapshot}. */
export interface SnapshotOptions {
  /** Size limit of the copy; by default it keeps the source's limit. */
  quotaBytes?: number;
  /** Make the copy read-only (btrfs only; a directory pool cannot stop root writing). */
  readOnly?: boolean;
}

/** Pool totals, for capacity decisions and `GET /admin/v1/hosts`. */
export interface PoolUsage {
  kind: string;
  totalBytes: number;
  usedBytes: number;
  /** What can still be written: for an image pool, also bounded by the disk under the image. */
  freeBytes: number;
}

/** A set of named volumes under one root. Every method validates names first. */
export interface StoragePool {
  readonly kind: 'btrfs' | 'directory';
  /** The mount point or directory holding the volumes. */
  readonly root: string;
  /** Creates an empty volume (btrfs subvolume with a qgroup limit; or a directory). Error if it exists. */
  create(name: string, opts?: CreateVolumeOptions): Promise<VolumeInfo>;
  /** A writable copy of `source` as it is now: a btrfs snapshot (instant, copy-on-write) or a full copy (`cp -a --reflink=auto`). */
  snapshot(source: string, name: string, opts?: SnapshotOptions): Promise<VolumeInfo>;
  /** Removes the volume and everything in it. Idempotent. */
  destroy(name: string): Promise<void>;
  /** Sets (or with null removes) the volume's size limit. PoolError 'not-found' when missing. */
  setQuota(name: string, quotaBytes: number | null): Promise<void>;
  /** The volume, or undefined when it does not exist. */
  info(name: string): Promise<VolumeInfo | undefined>;
  /** Names of all volumes, sorted. */
  list(): Promise<string[]>;
  /** Pool totals for capacity decisions and GET /admin/v1/hosts. */
  usage(): Promise<PoolUsage>;
  /** Unmounts a loop-mounted pool (volumes stay on the image); later calls fail. */
  close(): Promise<void>;
}

/** What went wrong, as a closed set a service can map to its own errors. */
export type PoolErrorCode = 'exists' | 'not-found' | 'no-space' | 'invalid-name' | 'backend';

/** Every failure of a pool is one of these; 'backend' carries the tool's own message. */
export class PoolError extends Error {
  constructor(
    readonly code: PoolErrorCode,
    message: string,
  ) {
    super(message);
    this.name = 'PoolError';
  }
}

/**
 * Volume names: lower-case letters, digits and dashes, not starting with a dash. Because
 * nothing else is allowed (no dot, no slash), a checked name can never leave the pool's
 * root, and names of the pool's own temporary entries (which start with a dot) never clash.
 */
export const VOLUME_NAME = /^[a-z0-9][a-z0-9-]{0,100}$/;

/** Throws PoolError 'invalid-name' unless `name` matches {@link VOLUME_NAME}. */
export function checkName(name: string): void {
  if (typeof name !== 'string' || !VOLUME_NAME.test(name)) {
    throw new PoolError('invalid-name', `invalid volume name ${JSON.stringify(name)}`);
  }
}

/** Throws a RangeError (a caller's bug, not a pool failure) unless `bytes` is a usable limit. */
export function checkQuota(bytes: number | null | undefined): void {
  if (bytes === null || bytes === undefined) return;
  if (!Number.isSafeInteger(bytes) || bytes <= 0) {
    throw new RangeError(`quota must be a positive whole number of bytes, got ${bytes}`);
  }
}

/**
 * Whether a filesystem error means "full": out of space, or over a quota. Node has no name
 * for EDQUOT (it reports "Unknown system error -122"), so the number is what counts.
 */
export function isNoSpace(err: unknown): boolean {
  const e = err as NodeJS.ErrnoException | null;
  return e?.code === 'ENOSPC' || e?.errno === -constants.errno.EDQUOT;
}

/** Maps the filesystem's own errors to the pool's codes; PoolErrors pass through. */
export function asPoolError(err: unknown): PoolError {
  if (err instanceof PoolError) return err;
  const message = err instanceof Error ? err.message : String(err);
  return new PoolError(isNoSpace(err) ? 'no-space' : 'backend', message);
}

/** Throws PoolError 'exists' when something is already at `file` (the volume `name`). */
export async function mustNotExist(file: string, name: string): Promise<void> {
  try {
    await lstat(file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw err;
  }
  throw new PoolError('exists', `volume ${name} already exists`);
}
