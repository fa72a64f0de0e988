/** What every service is built from: the store, the clock, the secret box, the job catalogue. */
import type { Logger } from 'pino';
import type { Config } from '../config.js';
import type { SecretBox } from '../crypto/secret-box.js';
import type { JobCatalogue } from '../jobs/catalogue.js';
import type { BlobStore } from '../objects/blobs/blob-store.js';
import type { DatabaseHost } from '../engines/host/database-host.js';
import type { MachineRuntime } from '../runtime/runtime.js';
import type { PoolHandle } from '../storage/pool-handle.js';
import type { Db } from '../store/db.js';
import type { AuthEvents } from './authenticator.js';

export type Clock = () => Date;

export interface ServiceContext {
  db: Db;
  clock: Clock;
  box: SecretBox;
  jobs: JobCatalogue;
  config: Config;
  log: Logger;
  /** Caches of keys and orgs that changes must invalidate. */
  auth: AuthEvents;
  /** Where object bytes live (filesystem or S3). */
  blobs: BlobStore;
  /** The host's managed database servers: engines, fronts, sleep and failover. */
  dbHost: DatabaseHost;
  /** The host's storage pool (volumes, databases), opened on first use. */
  pool: PoolHandle;
  /** Runs machines on this host (made on first use). */
  machines?: MachineRuntime;
}
