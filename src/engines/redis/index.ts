/**
 * The Redis engine: one redis-server per instance, run as the service user from its pool
 * volume, listening with TLS on 127.0.0.1:internalPort (no plain TCP) and on a private
 * Unix socket for the platform's own admin user. The customer is ACL user `app`; the
 * `default` user is off. A persistent instance (one with an archive) keeps a timestamped
 * AOF, which is also its archive: forks copy it and cut it at a second (see archive.ts).
 *
 * Every method is idempotent. Work that copies data into a new volume (branch, restore)
 * marks the volume complete last; a rerun finds a complete volume and only starts it, or
 * an incomplete one and makes it again.
 */
import { mkdir } from 'node:fs/promises';
import type {
  ArchiveRange,
  ArchiveRef,
  DatabaseEngine,
  EngineEnv,
  InstanceSpec,
} from '../engine.js';
import { ownerUid } from '../../host/tree-owner.js';
import { EngineError } from '../engine.js';
import { truncateAof } from './aof.js';
import { checkRestorable, cutSecond, rangeOf } from './archive.js';
import { redisBinaries } from './binaries.js';
import { copyForBranch } from './branch.js';
import { flushAof } from './flush.js';
import { copySource, pruneGenerations, restoreSource, rotate } from './generations.js';
import { KeyedLock } from './lock.js';
import { prepareCopy } from './prepare.js';
import type { RedisPaths } from './paths.js';
import { runningPid } from './process.js';
import { startServer, stopServer } from './server.js';
import { engineErrorOf, isComplete, markComplete, VolumePaths } from './volumes.js';

/** The DatabaseEngine for Redis (7.0 or later, built with TLS). */
export class RedisEngine implements DatabaseEngine {
  readonly kind = 'redis' as const;
  private readonly vols = new VolumePaths();
  private readonly locks = new KeyedLock();

  /** Makes the (empty) volume, lays it out and starts the server. */
  async provision(env: EngineEnv, inst: InstanceSpec, _opts: { locale?: string }): Promise<void> {
    await this.locked(inst, async () => {
      const bins = await redisBinaries();
      let paths = await this.vols.find(env.pool, inst.volume);
      if (!paths) paths = await this.vols.create(env, inst);
      // A new instance has no data to copy: the layout at start is all it needs.
      if (!(await isComplete(paths, inst.id))) await markComplete(paths, inst.id);
      await startServer(env, inst, paths, bins);
    });
  }

  async start(env: EngineEnv, inst: InstanceSpec): Promise<void> {
    await this.locked(inst, async () => {
      const paths = await this.vols.get(env.pool, inst.volume);
      if (!(await isComplete(paths, inst.id))) {
        throw new EngineError(
          'failed',
          `the volume ${inst.volume} holds no complete instance ${inst.id}`,
        );
      }
      await startServer(env, inst, paths, await redisBinaries());
    });
  }

  async stop(
    env: EngineEnv,
    inst: InstanceSpec,
    mode: 'fast' | 'immediate' = 'fast',
  ): Promise<void> {
    await this.locked(inst, async () => {
      const paths = await this.vols.find(env.pool, inst.volume);
      if (paths) await stopServer(env, paths, await redisBinaries(), mode);
    });
  }

  async pid(env: EngineEnv, inst: InstanceSpec): Promise<number | undefined> {
    const paths = await this.vols.find(env.pool, inst.volume);
    return paths ? runningPid(paths, await redisBinaries()) : undefined;
  }

  /** A copy of `source` as it is now, as the independent, started instance `target`. */
  async branch(env: EngineEnv, source: InstanceSpec, target: InstanceSpec): Promise<void> {
    if (source.volume === target.volume) {
      throw new EngineError('failed', `a branch needs a volume of its own, not ${source.volume}`);
    }
    await this.locked(target, async () => {
      const bins = await redisBinaries();
      const done = await this.completeOrCleared(env, target);
      const paths = done ?? (await copyForBranch(env, this.vols, bins, source, target));
      if (!done) await prepareCopy(env, target, paths, bins);
      await startServer(env, target, paths, bins);
    });
  }

  /** Redis runs no SQL: nothing to prepare. */
  async prepareSqlReader(): Promise<void> {}

  async flushArchive(env: EngineEnv, inst: InstanceSpec): Promise<void> {
    const paths = await this.vols.find(env.pool, inst.volume);
    if (!paths) return;
    const running = (await runningPid(paths, await redisBinaries())) !== undefined;
    await flushAof(env, paths, running);
  }

  /**
   * A new base: the live AOF becomes a generation and the server rewrites it
   * (generations.ts), so that what precedes it can later be pruned. A no-op for a server
   * that is not persistent or not running (a stopped one gained no history to split).
   */
  async baseBackup(env: EngineEnv, inst: InstanceSpec): Promise<void> {
    const paths = await this.vols.find(env.pool, inst.volume);
    if (!paths || (await runningPid(paths, await redisBinaries())) === undefined) return;
    await this.history(inst.volume, async () => {
      await rotate(env, paths, await ownerUid(paths.dataDir));
    }).catch((err: unknown) => {
      throw engineErrorOf(err, inst.volume);
    });
  }

  async archiveRange(env: EngineEnv, archive: ArchiveRef): Promise<ArchiveRange> {
    const paths = archive.sourceVolume
      ? await this.vols.find(env.pool, archive.sourceVolume)
      : undefined;
    return rangeOf(paths);
  }

  /**
   * Removes the AOF generations only moments before `before` need (generations.ts); the
   * live AOF stays whole, so the newest base keeps what `baseBackup` last split off.
   */
  async pruneArchive(env: EngineEnv, archive: ArchiveRef, before: Date): Promise<void> {
    if (!archive.sourceVolume) return;
    const volume = archive.sourceVolume;
    const paths = await this.vols.find(env.pool, volume);
    if (!paths) return;
    const removed = await this.history(volume, () => pruneGenerations(paths, before));
    if (removed > 0) env.log.info({ archive: archive.id, before, removed }, 'archive pruned');
  }

  /**
   * A fork as of `asOf`: the source's AOF copied into target's volume, cut after the
   * second of `asOf` (see archive.ts for the granularity), loaded and started.
   */
  async restore(
    env: EngineEnv,
    archive: ArchiveRef,
    asOf: Date,
    target: InstanceSpec,
  ): Promise<void> {
    if (archive.sourceVolume === target.volume) {
      throw new EngineError('failed', `a fork needs a volume of its own, not ${target.volume}`);
    }
    await this.locked(target, async () => {
      const bins = await redisBinaries();
      let paths = await this.completeOrCleared(env, target);
      if (!paths) {
        const found = archive.sourceVolume
          ? await this.vols.find(env.pool, archive.sourceVolume)
          : undefined;
        const src = await checkRestorable(archive, found, asOf);
        const dst = await this.vols.create(env, target);
        paths = dst;
        await mkdir(dst.dataDir, { mode: 0o700 });
        // Root's copy in a closed volume: redis-check-aof may run on it as root. Read
        // while no rotation or prune of the source runs (they share its history lock).
        await this.history(archive.sourceVolume!, async () => {
          const source = await restoreSource(src, asOf);
          if (!source) {
            throw new EngineError(
              'as-of-out-of-range',
              `${asOf.toISOString()} is before the oldest moment of archive ${archive.id}`,
            );
          }
          await copySource(source, dst.aofDir, await ownerUid(src.dataDir));
        });
        await truncateAof(paths.aofDir, cutSecond(asOf), bins.checkAof);
        await prepareCopy(env, target, paths, bins);
      }
      await startServer(env, target, paths, bins);
    });
  }

  /** Stops the server at once and destroys its volume (and its socket directory). */
  async destroy(env: EngineEnv, inst: InstanceSpec): Promise<void> {
    await this.locked(inst, async () => {
      const paths = await this.vols.find(env.pool, inst.volume);
      if (paths) await stopServer(env, paths, await redisBinaries(), 'immediate');
      await this.vols.destroy(env, inst.volume);
    });
  }

  /** Nothing to remove: a redis archive lives in (and goes with) its instance's volume. */
  async destroyArchive(_env: EngineEnv, _archive: ArchiveRef): Promise<void> {}

  /**
   * The paths of target's volume when it already holds target's complete data (a rerun);
   * otherwise removes whatever an interrupted attempt left and returns undefined.
   */
  private async completeOrCleared(
    env: EngineEnv,
    target: InstanceSpec,
  ): Promise<RedisPaths | undefined> {
    const paths = await this.vols.find(env.pool, target.volume);
    if (!paths) return undefined;
    if (await isComplete(paths, target.id)) return paths;
    // An interrupted copy may have left a private server running on it (aofToRdb).
    await stopServer(env, paths, await redisBinaries(), 'immediate');
    await this.vols.destroy(env, target.volume);
    return undefined;
  }

  /** Runs `fn` alone among the rotations, prunes and fork copies of `volume`'s AOF history. */
  private history<T>(volume: string, fn: () => Promise<T>): Promise<T> {
    return this.locks.with(`history:${volume}`, fn);
  }

  /** Runs `fn` alone for the instance's volume, with "pool full" as EngineError 'no-space'. */
  private locked(inst: InstanceSpec, fn: () => Promise<void>): Promise<void> {
    return this.locks.with(inst.volume, () =>
      fn().catch((err: unknown) => {
        throw engineErrorOf(err, inst.volume);
      }),
    );
  }
}
