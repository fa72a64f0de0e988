/**
 * The contract between the databases service (rows, jobs, the API) and a runtime that
 * runs managed database servers on a host: `DatabaseRuntime`. The local runtime
 * (engines/local) runs them on this host with the engines (engines/postgres,
 * engines/redis), TCP fronts in pier's process and cgroups; a host agent on another
 * machine would be the next implementation, reached over the network.
 *
 * That is why the contract is shaped as it is:
 * - It speaks of whole instances (`InstanceSpec`, `ArchiveRef`, database ids), never of
 *   engine objects or their `EngineEnv`, which only exist where the servers run.
 * - It never assumes the platform's store is reachable: a runtime writes no rows. What it
 *   observes on its own (a database fell asleep or woke, a primary died and its standby
 *   took over, a standby was lost) comes back through the callbacks of
 *   `DatabaseRuntimeEvents`, and the service writes the rows and queues the jobs.
 * - Every method is idempotent: a job that dies halfway runs the same call again, and
 *   the call finishes the work or finds it done.
 */
import type { Power, SuspendPolicy } from '../host/sleep-policy.js';
import type { ArchiveRange, ArchiveRef, InstanceSpec } from './engine.js';

export type { Power, SuspendPolicy } from '../host/sleep-policy.js';

export type DatabaseKind = 'postgres' | 'redis';

/** An instance to remove, known even after its row is gone (job payloads carry it). */
export interface InstanceRef {
  id: string;
  volume: string;
  kind: DatabaseKind;
}

/** What a served database runs and under which rules. */
export interface ServeState {
  primary: InstanceSpec;
  standby?: InstanceSpec;
  power: Power;
  policy: SuspendPolicy | null;
  memoryMb: number;
}

/** A standby that replaced its dead primary behind the same front. */
export interface FailoverEvent {
  databaseId: string;
  /** The standby instance, now the primary. */
  promoted: string;
  /** The dead primary instance, removed from the host. */
  removed: string;
}

/**
 * What a runtime reports of its own accord. The service writes rows and queues jobs here;
 * the runtime logs a callback that fails and goes on (the event is not retried).
 */
export interface DatabaseRuntimeEvents {
  /** A database fell asleep (`suspended`, `stopped`) or woke (`running`). */
  onPowerChanged(databaseId: string, power: Power): Promise<void>;
  /**
   * A standby was promoted: `removed` is gone, `promoted` is the primary. Reported once
   * the promoted server serves and before the dead primary's volume is removed.
   */
  onFailover(event: FailoverEvent): Promise<void>;
  /** A redundant database's standby died and was let go of: it needs a new one. */
  onStandbyLost(databaseId: string): Promise<void>;
  /**
   * Whether a client's connection may wake the sleeping database now: no while its
   * organization's credit is blocked (docs/billing.md), and the connection is closed.
   * Asked only of a connection that would wake it, never of one that finds it awake.
   */
  mayWake(databaseId: string): Promise<boolean>;
}

export interface DatabaseRuntime {
  /** The host this runtime runs databases on (`databases.host`). */
  readonly hostId: string;

  /** Free and total bytes of the storage pool that holds the databases' volumes. */
  capacity(): Promise<{ freeBytes: number; totalBytes: number }>;

  /** A loopback port for a new server instance. */
  internalPort(): Promise<number>;

  /**
   * Opens the front of a database (the public port customers connect to): on `port`
   * (taking a database back) or on a free port of the range (a new database). Resolves
   * with the port; undefined means the range is full. Connections are refused until the
   * database is served. Opening an open front answers its port.
   */
  openFront(databaseId: string, kind: DatabaseKind, port?: number): Promise<number | undefined>;

  /**
   * Makes a new, empty database server on `primary`'s volume and starts it with its
   * password set. `locale` is an ICU locale (postgres only).
   */
  create(kind: DatabaseKind, primary: InstanceSpec, opts: { locale?: string }): Promise<void>;

  /**
   * Builds `standby` from the running `primary` of `databaseId` (kept awake meanwhile) and
   * starts it replicating synchronously; a served database watches it from then on.
   * Throws `EngineError('unsupported')` for an engine without replication.
   */
  createStandby(
    databaseId: string,
    kind: DatabaseKind,
    primary: InstanceSpec,
    standby: InstanceSpec,
  ): Promise<void>;

  /**
   * A copy-on-write copy of `source` (an instance of `sourceId`, kept awake meanwhile) as
   * it is now into `target`, configured as an independent server and started.
   */
  branch(
    sourceId: string,
    kind: DatabaseKind,
    source: InstanceSpec,
    target: InstanceSpec,
  ): Promise<void>;

  /**
   * Restores `archive` as of `asOf` into `target` (a fork, or the new instance of a
   * restore in place), configured as an independent server and started.
   */
  restore(kind: DatabaseKind, archive: ArchiveRef, asOf: Date, target: InstanceSpec): Promise<void>;

  /** What moments `archive` can restore. */
  archiveRange(kind: DatabaseKind, archive: ArchiveRef): Promise<ArchiveRange>;

  /**
   * Removes from `archive` (of `databaseId`) what only moments before `before` need (the
   * point-in-time window's start), keeping all a restore to a moment from `before` on
   * reads. Idempotent.
   */
  pruneArchive(
    databaseId: string,
    kind: DatabaseKind,
    archive: ArchiveRef,
    before: Date,
  ): Promise<void>;

  /**
   * Makes sure the archive of `inst` (an instance of `databaseId`, kept awake meanwhile)
   * holds everything committed up to now.
   */
  flushArchive(databaseId: string, kind: DatabaseKind, inst: InstanceSpec): Promise<void>;

  /** Takes a base backup of `inst` (of `databaseId`, kept awake meanwhile) into its archive. */
  baseBackup(databaseId: string, kind: DatabaseKind, inst: InstanceSpec): Promise<void>;

  /**
   * Makes the role read-only SQL runs as on `inst`, the primary of `databaseId` (kept awake
   * meanwhile), for databases made before it existed (DatabaseEngine.prepareSqlReader).
   */
  prepareSqlReader(databaseId: string, kind: DatabaseKind, inst: InstanceSpec): Promise<void>;

  /**
   * Finds the servers of a database after pier (or the host) restarted, starting those
   * that died unless the database was `stopped`. Resolves with the power it is in now.
   */
  takeBack(
    databaseId: string,
    kind: DatabaseKind,
    instances: InstanceSpec[],
    power: Power,
  ): Promise<Power>;

  /**
   * Serves a database whose front is open: the front pipes to the primary from now on,
   * the sleep policy and (with a standby) the failover watchdog look after it.
   */
  serve(databaseId: string, state: ServeState): Promise<void>;

  /**
   * Stops a served database now, whatever its sleep policy: its servers (a standby too)
   * shut down, data kept, power `stopped` (reported). A client's connection wakes it
   * again once `mayWake` allows. A database not served here: nothing.
   */
  stop(databaseId: string): Promise<void>;

  /** Updates the sleep policy of a served database. */
  setPolicy(databaseId: string, policy: SuspendPolicy | null): Promise<void>;

  /** Removes instances: their servers (thawed first), volumes and cgroups. */
  destroy(instances: InstanceRef[]): Promise<void>;

  /** Removes an archive and everything in it. */
  destroyArchive(kind: DatabaseKind, archiveId: string): Promise<void>;

  /** Stops serving a database: closes its front (its servers are left to `destroy`). */
  forget(databaseId: string): Promise<void>;

  /**
   * Removes the OS identity a deleted database's servers ran as, once they are destroyed;
   * `archiveIds` are the archives it wrote (those still kept are taken from it first).
   * Idempotent.
   */
  releaseIdentity(databaseId: string, archiveIds: string[]): Promise<void>;

  /** The platform CA's certificate (PEM) that signs the servers' TLS certificates. */
  caCertificate(): Promise<string>;

  /** Starts the sleep policy's clock and the failover watchdog. */
  startTickers(): void;

  /** Closes every front; servers keep running and are taken back on the next start. */
  close(): Promise<void>;
}
