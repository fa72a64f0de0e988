/**
 * The instance's volume in the pool: finding its paths, making it (with the quota and the
 * service user as owner), and the marker that says its data is complete.
 */
import { readFile, rm } from 'node:fs/promises';
import { isNoSpace, PoolError, type StoragePool } from '../../storage/pool/pool.js';
import { EngineError, type EngineEnv, type InstanceSpec } from '../engine.js';
import { closeDir, writeAtomic } from './files.js';
import { redisPaths, type RedisPaths } from './paths.js';

const GiB = 1024 * 1024 * 1024;

/** Turns "the pool is full" (a PoolError or a filesystem error) into EngineError 'no-space'. */
export function engineErrorOf(err: unknown, what: string): unknown {
  if (err instanceof EngineError) return err;
  const full = (err instanceof PoolError && err.code === 'no-space') || isNoSpace(err);
  if (!full) return err;
  const why = err instanceof Error ? err.message : String(err);
  return new EngineError('no-space', `no room in the storage pool for ${what}: ${why}`);
}

/** The quota of an instance's volume, in bytes. */
export function quotaOf(inst: InstanceSpec): number {
  return Math.max(1, Math.round(inst.sizeGb * GiB));
}

/**
 * Paths of volumes by name. A pool's info() may walk the whole volume (the directory pool
 * measures its usage), so each volume's path is looked up once and kept.
 */
export class VolumePaths {
  private readonly known = new Map<string, string>();

  private key(pool: StoragePool, volume: string): string {
    return `${pool.root}\0${volume}`;
  }

  /** The paths of `volume`, or undefined when it does not exist. */
  async find(pool: StoragePool, volume: string): Promise<RedisPaths | undefined> {
    const cached = this.known.get(this.key(pool, volume));
    if (cached) return redisPaths(cached);
    const info = await pool.info(volume);
    if (!info) return undefined;
    this.known.set(this.key(pool, volume), info.path);
    return redisPaths(info.path);
  }

  /** The paths of `volume`; EngineError 'failed' when it does not exist. */
  async get(pool: StoragePool, volume: string): Promise<RedisPaths> {
    const paths = await this.find(pool, volume);
    if (!paths) throw new EngineError('failed', `the volume ${volume} does not exist`);
    return paths;
  }

  /**
   * Makes the empty volume of `inst`: root's and closed (0700) until the layout of its
   * first start opens it to the server (see paths.ts for who owns what).
   */
  async create(env: EngineEnv, inst: InstanceSpec): Promise<RedisPaths> {
    const info = await env.pool
      .create(inst.volume, { quotaBytes: quotaOf(inst) })
      .catch((err: unknown) => {
        throw engineErrorOf(err, inst.volume);
      });
    this.known.set(this.key(env.pool, inst.volume), info.path);
    return redisPaths(info.path);
  }

  /**
   * A copy of `source` as `target` (a btrfs snapshot, or a full copy), with target's quota,
   * closed to the server at once: root prepares it before it is opened again.
   */
  async snapshot(env: EngineEnv, source: string, target: InstanceSpec): Promise<RedisPaths> {
    const info = await env.pool
      .snapshot(source, target.volume, { quotaBytes: quotaOf(target) })
      .catch((err: unknown) => {
        throw engineErrorOf(err, target.volume);
      });
    this.known.set(this.key(env.pool, target.volume), info.path);
    await closeDir(info.path);
    return redisPaths(info.path);
  }

  /** Destroys `volume` (idempotent), and the socket directory kept outside it, if any. */
  async destroy(env: EngineEnv, volume: string): Promise<void> {
    const paths = await this.find(env.pool, volume);
    if (paths?.socketRoot) await rm(paths.socketRoot, { recursive: true, force: true });
    await env.pool.destroy(volume);
    this.known.delete(this.key(env.pool, volume));
  }
}

/** Whether the volume at `paths` holds the complete data of instance `id`. */
export async function isComplete(paths: RedisPaths, id: string): Promise<boolean> {
  const text = await readFile(paths.marker, 'utf8').catch(() => '');
  return text.trim() === id;
}

/** Records that the volume at `paths` holds the complete data of instance `id`. */
export async function markComplete(paths: RedisPaths, id: string): Promise<void> {
  await writeAtomic(paths.marker, `${id}\n`, 0o644);
}
