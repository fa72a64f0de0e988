/**
 * Chooses and opens the host's storage pool: btrfs where the host allows it (root,
 * btrfs-progs, and loop devices unless the data dir is on btrfs already), else plain
 * directories. The choice is written to `<dir>/pool.kind` and kept from then on: a pool
 * that silently changed kind after a restart would hide every existing volume, so a btrfs
 * pool that cannot be opened again is an error, not a reason to fall back.
 */
import { access, constants, mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { isOnBtrfs } from './btrfs-cli.js';
import { BtrfsPool } from './btrfs-pool.js';
import { DirectoryPool } from './directory-pool.js';
import { PoolError, type StoragePool } from './pool.js';
import { findTool } from './run.js';

/** Options of {@link openStoragePool}. */
export interface OpenStoragePoolOptions {
  /** The pool's directory, e.g. `<dataDir>/pool`. */
  dir: string;
  /** 'directory' forces the directory pool for a new pool; an existing pool keeps its kind. */
  prefer?: 'btrfs' | 'directory';
  /** Size of a new btrfs image (sparse); default 64 GiB. */
  imageSizeBytes?: number;
  /** Where the choice and the reason for it are logged (a pino logger fits). */
  log?: PoolLog;
}

/** The two logger methods the pool uses, as pino has them. */
export interface PoolLog {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

/** The open pool and, in words, why it is this kind (for logs and GET /admin/v1/hosts). */
export interface OpenedStoragePool {
  pool: StoragePool;
  reason: string;
}

type Kind = StoragePool['kind'];

/** Why btrfs cannot be used on this host, or undefined when it may be tried. */
export async function btrfsUnavailableReason(dir: string): Promise<string | undefined> {
  if (process.getuid?.() !== 0) {
    return 'not running as root (btrfs needs root for mounts, subvolumes and quotas)';
  }
  if (!(await findTool('mkfs.btrfs')) || !(await findTool('btrfs'))) {
    return 'btrfs-progs is not installed (mkfs.btrfs, btrfs)';
  }
  if (!(await isOnBtrfs(dir))) {
    if (!(await findTool('losetup'))) return 'losetup is not installed';
    try {
      await access('/dev/loop-control', constants.R_OK | constants.W_OK);
    } catch {
      return 'no loop devices (/dev/loop-control is missing) and the data dir is not on btrfs';
    }
  }
  return undefined;
}

/** The kind recorded for this pool, or inferred from what is on disk; undefined for a new pool. */
async function recordedKind(dir: string): Promise<Kind | undefined> {
  try {
    const text = (await readFile(path.join(dir, 'pool.kind'), 'utf8')).trim();
    if (text === 'btrfs' || text === 'directory') return text;
    throw new PoolError('backend', `${dir}/pool.kind holds ${JSON.stringify(text)}`);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  // A crash between making the image and recording the kind: the image says btrfs.
  return (await exists(path.join(dir, 'pool.img'))) ? 'btrfs' : undefined;
}

async function exists(p: string): Promise<boolean> {
  try {
    await stat(p);
    return true;
  } catch {
    return false;
  }
}

function describeBtrfs(pool: BtrfsPool): string {
  return pool.imagePath
    ? `btrfs on the loop-mounted image ${pool.imagePath}`
    : `btrfs: the data dir is on btrfs; subvolumes in ${pool.root}`;
}

/** Opens the storage pool in `dir`, choosing its kind the first time. */
export async function openStoragePool(opts: OpenStoragePoolOptions): Promise<OpenedStoragePool> {
  const dir = path.resolve(opts.dir);
  await mkdir(dir, { recursive: true, mode: 0o711 });
  const recorded = await recordedKind(dir);
  const record = (kind: Kind) => writeFile(path.join(dir, 'pool.kind'), `${kind}\n`);
  const openBtrfs = async (): Promise<OpenedStoragePool> => {
    const pool = await BtrfsPool.open({ dir, imageSizeBytes: opts.imageSizeBytes });
    await record('btrfs');
    const reason = describeBtrfs(pool);
    opts.log?.info({ dir, kind: pool.kind, reason }, 'storage pool opened');
    return { pool, reason };
  };

  if (recorded === 'btrfs') {
    // No fallback: the volumes are in there.
    const cannot = await btrfsUnavailableReason(dir);
    if (cannot) {
      throw new PoolError('backend', `the storage pool in ${dir} is btrfs, but ${cannot}`);
    }
    return openBtrfs();
  }

  let why: string | undefined;
  if (recorded === 'directory') why = 'the pool was made as a directory pool and keeps its kind';
  else if (opts.prefer === 'directory') why = 'the directory pool is configured';
  else why = await btrfsUnavailableReason(dir);
  if (why === undefined) {
    try {
      return await openBtrfs();
    } catch (err) {
      why = `btrfs failed: ${(err as Error).message}`;
    }
  }

  const pool = await DirectoryPool.open({ dir });
  await record('directory');
  const reason = `directory pool (full copies, no quotas): ${why}`;
  // A fresh pool that could not be btrfs is worth a warning; a recorded choice is not news.
  opts.log?.[recorded ? 'info' : 'warn']({ dir, kind: pool.kind, reason }, 'storage pool opened');
  return { pool, reason };
}
