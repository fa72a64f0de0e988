/**
 * The contract between the databases service (rows, jobs, ports, fronts) and the engines
 * that run real servers: PostgreSQL (engines/postgres) and Redis (engines/redis). An
 * engine knows how to lay out, start, stop, copy and recover one kind of server inside
 * volumes of the storage pool; it knows nothing of organizations, HTTP or the job table.
 *
 * Every method is idempotent: a job that dies halfway through a call runs the same call
 * again, and the call finishes the work or finds it done.
 */
import type { StoragePool } from '../storage/pool/pool.js';
import type { ServiceUser } from '../host/service-user.js';

/** One server process of a database (a primary, or the standby of a redundant one). */
export interface InstanceSpec {
  /** Stable id of the instance (`dbi-…`); names its volume and its cgroup. */
  id: string;
  /** Pool volume holding the server's data; the engine lays out what it needs inside. */
  volume: string;
  /**
   * Whose identity the server runs as: its database's id. A primary and its standby share
   * it (one database's data, one archive, a replication socket between them); a branch or
   * fork is another database, so another identity. Absent: the instance's own id.
   */
  owner?: string;
  /**
   * TCP port on 127.0.0.1 the server itself listens on. Clients never use it: they reach
   * the database through the platform's front on the public `port`, which pipes bytes here.
   */
  internalPort: number;
  memoryMb: number;
  /** Quota of the data volume, in GiB. */
  sizeGb: number;
  /** Password of the customer's role (postgres: role `app`; redis: ACL user `app`). */
  password: string;
  /** The archive this instance ships its history to; absent for ephemeral copies. */
  archive?: ArchiveRef;
  /**
   * Longest time, in seconds, that written data may wait before it reaches the archive
   * (postgres: `archive_timeout`). Absent: the engine's default.
   */
  flushIntervalS?: number;
}

/** A database's archive: WAL + base backups (postgres), timestamped AOF (redis). */
export interface ArchiveRef {
  /** Stable id (`arc-…`); postgres keeps the archive's files in a pool volume of this name. */
  id: string;
  /**
   * Volume of the instance that writes this archive, while it exists. Redis keeps its
   * timestamped AOF history in the instance's own volume and restores from there.
   */
  sourceVolume?: string;
}

/** What every engine call may use: the pool, who runs servers, TLS material, paths. */
export interface EngineEnv {
  pool: StoragePool;
  /**
   * Unprivileged user that runs the servers this call concerns (never root): the local
   * runtime passes the identity of the instance's database, so files a call makes or
   * copies belong to it, and a copy from another database is handed over to it.
   */
  user: ServiceUser;
  /** Who builds and owns templates (postgres); absent: `user`. Never a database's own. */
  templateUser?: ServiceUser;
  /** Directory for engine-wide state outside the pool (templates' locks, scratch). */
  stateDir: string;
  /** PEM files of the server certificate (signed by the platform CA) and its key. */
  tls: { certFile: string; keyFile: string; caFile: string };
  log: { info(obj: object, msg: string): void; warn(obj: object, msg: string): void };
}

/** The oldest and newest moments a fork or restore can reach from an archive. */
export interface ArchiveRange {
  /** Undefined while the archive has no complete base yet. */
  oldest?: Date;
  newest: Date;
}

export interface DatabaseEngine {
  readonly kind: 'postgres' | 'redis';

  /**
   * Makes the volume of a new, empty database (from a pre-initialized template, never a
   * fresh initdb per create), configures it (port, TLS, memory, archiving) and starts it
   * with `password` set. `locale` is an ICU locale (postgres only).
   */
  provision(env: EngineEnv, inst: InstanceSpec, opts: { locale?: string }): Promise<void>;

  /** Starts the server if it is not running; resolves when it accepts connections. */
  start(env: EngineEnv, inst: InstanceSpec): Promise<void>;

  /** Stops the server if it runs (fast shutdown; `immediate` for deletes). */
  stop(env: EngineEnv, inst: InstanceSpec, mode?: 'fast' | 'immediate'): Promise<void>;

  /** Pid of the running server's main process, or undefined when it is not running. */
  pid(env: EngineEnv, inst: InstanceSpec): Promise<number | undefined>;

  /**
   * A copy-on-write copy of `source` as it is now (running or not) into `target`'s volume,
   * configured as an independent server with `target`'s port, password and archive, and
   * started. The source keeps running undisturbed.
   */
  branch(env: EngineEnv, source: InstanceSpec, target: InstanceSpec): Promise<void>;

  /**
   * Makes sure the archive holds everything committed on `inst` up to now (postgres: a
   * commit record after now and a WAL switch, archived; redis: an fsynced AOF). Called
   * before a fork or restore reads the archive.
   */
  flushArchive(env: EngineEnv, inst: InstanceSpec): Promise<void>;

  /** Takes a base backup of `inst` into its archive (postgres; redis: a no-op). */
  baseBackup(env: EngineEnv, inst: InstanceSpec): Promise<void>;

  /**
   * Makes the role read-only SQL runs as on the running primary `inst`, with its login
   * (postgres: for databases made before the role existed; redis: a no-op, it runs no SQL).
   */
  prepareSqlReader(env: EngineEnv, inst: InstanceSpec): Promise<void>;

  /** What moments `archive` can restore. */
  archiveRange(env: EngineEnv, archive: ArchiveRef): Promise<ArchiveRange>;

  /**
   * Removes from `archive` what only moments before `before` need, keeping everything a
   * restore to any moment from `before` on reads (postgres: the base backups older than
   * the newest one consistent at or before `before`, and the WAL older than that base's
   * start). The archive's `oldest` afterwards is at or before `before` (or unchanged when
   * nothing could go). Idempotent; a missing archive is fine.
   */
  pruneArchive(env: EngineEnv, archive: ArchiveRef, before: Date): Promise<void>;

  /**
   * Restores `archive` as of `asOf` into `target`'s volume (full copy: base + replay),
   * configures it as an independent server and starts it. Holds exactly what was
   * committed up to `asOf`.
   */
  restore(env: EngineEnv, archive: ArchiveRef, asOf: Date, target: InstanceSpec): Promise<void>;

  /** Stops the server and destroys its volume. */
  destroy(env: EngineEnv, inst: InstanceSpec): Promise<void>;

  /** Removes an archive and everything in it. */
  destroyArchive(env: EngineEnv, archive: ArchiveRef): Promise<void>;
}

/** Extra powers of PostgreSQL: a synchronous streaming standby for host-redundant databases. */
export interface ReplicatingEngine extends DatabaseEngine {
  /** Builds `standby` from the running `primary` and starts it streaming synchronously. */
  createStandby(env: EngineEnv, primary: InstanceSpec, standby: InstanceSpec): Promise<void>;
  /** Promotes a standby to primary; resolves when it accepts writes. */
  promote(env: EngineEnv, standby: InstanceSpec): Promise<void>;
  /**
   * Makes `primary` stop waiting for its synchronous standby (lost for good, or about to be
   * replaced): without this, every commit on it hangs until a standby is back. Releases
   * commits already waiting. Idempotent. Optional so that other implementations still fit.
   */
  detachStandby?(env: EngineEnv, primary: InstanceSpec): Promise<void>;
}

/**
 * Errors an engine throws that a caller turns into an answer: a moment the archive
 * cannot reach, a request this engine cannot do, or a full pool.
 */
export class EngineError extends Error {
  constructor(
    readonly code: 'as-of-out-of-range' | 'unsupported' | 'no-space' | 'failed',
    message: string,
  ) {
    super(message);
    this.name = 'EngineError';
  }
}
