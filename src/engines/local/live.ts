/**
 * What the local runtime knows of a database it serves, shared by the runtime and its
 * failover watchdog (engines/local/failover.ts).
 */
import type { InstanceSpec } from '../engine.js';
import type { TcpFront } from '../front/tcp-front.js';
import type { DatabaseKind, Power, SuspendPolicy } from '../runtime.js';

export interface LiveDatabase {
  id: string;
  kind: DatabaseKind;
  front: TcpFront;
  /** False while a copy is restoring: connections are refused until it is ready. */
  ready: boolean;
  primary?: InstanceSpec;
  standby?: InstanceSpec;
  power: Power;
  policy: SuspendPolicy | null;
  memoryMb: number;
  /** Platform work in progress (branch, backup, ...): the database must not sleep meanwhile. */
  busy: number;
  /** When platform work last ended: it counts as activity, like a client's bytes. */
  lastBusyAt: number;
  /** Serializes sleep, wake and failover of this database. */
  queue: Promise<unknown>;
  primaryPid?: number;
  standbyPid?: number;
}

/** When a database was last used: a client's bytes through its front, or platform work. */
export function lastActivity(live: LiveDatabase): number {
  return Math.max(live.front.lastActivityAt, live.lastBusyAt);
}
