/**
 * The PostgreSQL engine: customer databases as servers run by the service user from pool
 * volumes, made from pre-initialized templates, archived (WAL + base backups) into an
 * archive volume, copied as branches and restores, and made redundant with a synchronous
 * standby. Each method is idempotent; calls on one volume are serialized in this process.
 */
import { NameLocks } from '../../storage/pool/name-lock.js';
import { isNoSpace, PoolError } from '../../storage/pool/pool.js';
import type {
  ArchiveRange,
  ArchiveRef,
  EngineEnv,
  InstanceSpec,
  ReplicatingEngine,
} from '../engine.js';
import { EngineError } from '../engine.js';
import { flush, prune, range, takeBaseBackup } from './archive.js';
import { branchInstance } from './branch.js';
import { discardVolume, prepareSqlReader, startInstance } from './instance.js';
import { expectedLayout, layoutOf, removeOutsideSocketDir } from './layout.js';
import { livePostmaster } from './postmaster.js';
import { halt } from './process.js';
import { provisionInstance } from './provision.js';
import { dropReplayWal } from './replay-wal.js';
import { restoreArchive } from './restore.js';
import { createStandby, detachStandby, promoteStandby } from './standby.js';
import { Templates } from './template.js';

/** Options of {@link PostgresEngine}. */
export interface PostgresEngineOptions {
  /** Directory of the server binaries for new databases; default: the newest installed. */
  binDir?: string;
}

/** Turns any failure into an EngineError: a full pool or disk is 'no-space'. */
export function asEngineError(err: unknown): EngineError {
  if (err instanceof EngineError) return err;
  const message = err instanceof Error ? err.message : String(err);
  const full = (err instanceof PoolError && err.code === 'no-space') || isNoSpace(err);
  return new EngineError(full ? 'no-space' : 'failed', message);
}

/** PostgreSQL as a {@link ReplicatingEngine}. */
export class PostgresEngine implements ReplicatingEngine {
  readonly kind = 'postgres' as const;
  private readonly locks = new NameLocks();
  private readonly templates: Templates;
  private readonly binDir: string | undefined;

  constructor(opts: PostgresEngineOptions = {}) {
    this.binDir = opts.binDir;
    this.templates = new Templates(opts.binDir);
  }

  /** Runs `fn` holding the locks of `names`, with its failures as EngineErrors. */
  private async guard<T>(names: string[], fn: () => Promise<T>): Promise<T> {
    try {
      return await this.locks.with(names, fn);
    } catch (err) {
      throw asEngineError(err);
    }
  }

  provision(env: EngineEnv, inst: InstanceSpec, opts: { locale?: string }): Promise<void> {
    return this.guard([inst.volume], () =>
      provisionInstance(env, this.templates, inst, opts.locale, this.binDir),
    );
  }

  start(env: EngineEnv, inst: InstanceSpec): Promise<void> {
    return this.guard([inst.volume], async () => {
      await startInstance(env, inst, this.binDir);
    });
  }

  stop(env: EngineEnv, inst: InstanceSpec, mode: 'fast' | 'immediate' = 'fast'): Promise<void> {
    return this.guard([inst.volume], async () => {
      const info = await env.pool.info(inst.volume);
      if (info) await halt(layoutOf(info.path).pgdata, mode);
    });
  }

  async pid(env: EngineEnv, inst: InstanceSpec): Promise<number | undefined> {
    try {
      const info = await env.pool.info(inst.volume);
      return info ? await livePostmaster(layoutOf(info.path).pgdata) : undefined;
    } catch (err) {
      throw asEngineError(err);
    }
  }

  branch(env: EngineEnv, source: InstanceSpec, target: InstanceSpec): Promise<void> {
    return this.guard([target.volume], () => branchInstance(env, source, target, this.binDir));
  }

  flushArchive(env: EngineEnv, inst: InstanceSpec): Promise<void> {
    return this.guard([inst.volume], () => flush(env, inst, { binDir: this.binDir }));
  }

  baseBackup(env: EngineEnv, inst: InstanceSpec): Promise<void> {
    return this.guard([inst.volume], async () => {
      await takeBaseBackup(env, inst, this.binDir);
    });
  }

  prepareSqlReader(env: EngineEnv, inst: InstanceSpec): Promise<void> {
    return this.guard([inst.volume], () => prepareSqlReader(env, inst));
  }

  archiveRange(env: EngineEnv, archive: ArchiveRef): Promise<ArchiveRange> {
    return this.guard([], () => range(env, archive));
  }

  pruneArchive(env: EngineEnv, archive: ArchiveRef, before: Date): Promise<void> {
    return this.guard([archive.id], () => prune(env, archive, before));
  }

  restore(env: EngineEnv, archive: ArchiveRef, asOf: Date, target: InstanceSpec): Promise<void> {
    return this.guard([target.volume], () =>
      restoreArchive(env, archive, asOf, target, this.binDir),
    );
  }

  destroy(env: EngineEnv, inst: InstanceSpec): Promise<void> {
    return this.guard([inst.volume], async () => {
      await discardVolume(env, inst.volume);
      await removeOutsideSocketDir(expectedLayout(env, inst.volume));
      await dropReplayWal(env, inst); // a restore a crash interrupted, never rerun
    });
  }

  destroyArchive(env: EngineEnv, archive: ArchiveRef): Promise<void> {
    return this.guard([archive.id], () => env.pool.destroy(archive.id));
  }

  createStandby(env: EngineEnv, primary: InstanceSpec, standby: InstanceSpec): Promise<void> {
    return this.guard([primary.volume, standby.volume], () =>
      createStandby(env, primary, standby, this.binDir),
    );
  }

  promote(env: EngineEnv, standby: InstanceSpec): Promise<void> {
    return this.guard([standby.volume], () => promoteStandby(env, standby, this.binDir));
  }

  detachStandby(env: EngineEnv, primary: InstanceSpec): Promise<void> {
    return this.guard([primary.volume], () => detachStandby(env, primary, this.binDir));
  }
}
