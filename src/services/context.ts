/** What every service is built from: the store, the clock, the secret box, the job catalogue. */
import type { EventEmitter } from 'node:events';
import type { Logger } from 'pino';
import type { Config } from '../config.js';
import type { SecretBox } from '../crypto/secret-box.js';
import type { OutboundGuard } from '../host/outbound-guard.js';
import type { JobCatalogue } from '../jobs/catalogue.js';
import type { BlobStore } from '../objects/blobs/blob-store.js';
import type { DatabaseRuntime } from '../engines/runtime.js';
import type { ImageStore } from '../runtime/images/index.js';
import type { SourceBuilder } from '../runtime/builds/local-builder.js';
import type { GuestSession, MachineRuntime } from '../runtime/runtime.js';
import type { PoolHandle } from '../storage/pool-handle.js';
import type { Db } from '../store/db.js';
import type { BucketCaches } from './buckets/caches.js';

export type Clock = () => Date;

/**
 * What this replica holds in memory and nowhere else: a restart loses it, and every other
 * replica has its own. Built in platform.ts, so that one file shows all of it. Rows in the
 * store are the truth; each of these only makes this process quicker or tells it what it
 * is doing itself.
 */
export interface ReplicaMemory {
  /** Word that a machine's row changed, so that waits wake at once (machines/state-events.ts). */
  machineChanges: EventEmitter;
  /** When each machine last served a proxied request, in ms: the sleep policy's activity. */
  machineRequests: Map<string, number>;
  /** Proxied requests and tunnels under way to each machine: what a deploy drains. */
  machineInFlight: Map<string, number>;
  /** Each machine's CPU time at the last sleep tick, to tell the share used since. */
  machineCpuSeen: Map<string, { cpuMs: number; at: number }>;
  /** Shell sessions attached in this process, by session id. */
  execSessions: Map<string, GuestSession>;
  /** Checkpoints being made in this process: never swept as a crash's leftovers. */
  checkpointsInFlight: Set<string>;
}

/** What services tell the auth layer after a change they committed. */
export interface AuthEvents {
  /** A key of `orgId` was minted (or changed): listings must be read again. */
  keysChanged(orgId: string): Promise<void>;
  keyRevoked(keyId: string, orgId: string): Promise<void>;
  /** Suspension or management of the org changed. */
  orgChanged(orgId: string): Promise<void>;
  /** The org's key listing, from cache while fresh, else from `load`. */
  keyListing<T>(orgId: string, load: () => Promise<T>): Promise<T>;
  /** Calls `fn(kind, id)` for every invalidation, local or from another replica. */
  onInvalidation(fn: (kind: string, id: string) => void): void;
}

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
  /** This process's S3 keys and CORS rules for the gateway, which bucket changes drop. */
  bucketCaches: BucketCaches;
  /** Runs the managed database servers: fronts, sleep and failover (engines/runtime.ts). */
  databases: DatabaseRuntime;
  /** The host's storage pool (volumes, databases), opened on first use. */
  pool: PoolHandle;
  /** What this replica keeps in memory (see ReplicaMemory). */
  memory: ReplicaMemory;
  /** What calls made for customers may reach (webhook deliveries): host/outbound-guard.ts. */
  outbound: OutboundGuard;
  /** Runs machines on this host (made on first use). */
  machines?: MachineRuntime;
  /** The host's image store (machines and builds run from it; deploys pin digests in it). */
  images?: ImageStore;
  /** Builds images from sources on this host (runtime/builds). */
  builder?: SourceBuilder;
}
