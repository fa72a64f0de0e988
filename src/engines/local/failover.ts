/**
 * Failover of host-redundant databases, run by the local runtime's watchdog: a primary
 * whose process died is replaced by its synchronous standby behind the same front; a
 * standby that died is let go of, so the primary's commits stop waiting for it, and
 * rebuilt. Rows are not written here: the change is reported through the runtime's
 * events, and the service records it and queues the rebuild.
 */
import { readFileSync } from 'node:fs';
import type { Logger } from 'pino';
import type { EngineEnv, InstanceSpec, ReplicatingEngine } from '../engine.js';
import type { DatabaseRuntimeEvents } from '../runtime.js';
import type { LiveDatabase } from './live.js';

/** What failover needs of the runtime: the engine, its env, cgroups, and whom to tell. */
export interface RedundancyDeps {
  engine: ReplicatingEngine;
  env: EngineEnv;
  log: Logger;
  /** Puts a running instance into its cgroup and records its pid on `live`. */
  adopt(live: LiveDatabase, inst: InstanceSpec): Promise<void>;
  /** Removes an instance's cgroup (after its server is gone). */
  dropCgroup(instanceId: string): Promise<void>;
  events: Pick<DatabaseRuntimeEvents, 'onFailover' | 'onStandbyLost'>;
}

/**
 * Whether `pid` runs. A zombie does not: a server whose parent (a pier that restarted)
 * is gone is re-parented to init, and where init does not reap, its corpse keeps the pid.
 */
export function isAlive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The state follows the command name, which is in parentheses and may hold spaces.
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

export async function loseStandby(deps: RedundancyDeps, live: LiveDatabase): Promise<void> {
  if (!live.primary || !live.standbyPid || isAlive(live.standbyPid)) return;
  deps.log.warn({ id: live.id, standby: live.standby?.id }, 'standby died: rebuilding');
  live.standbyPid = undefined;
  await deps.engine.detachStandby?.(deps.env, live.primary);
  // The rebuild (a durable job) starts it again and makes the primary wait for it anew.
  await deps.events.onStandbyLost(live.id);
}

export async function failover(deps: RedundancyDeps, live: LiveDatabase): Promise<void> {
  if (!live.standby || !live.primary || (live.primaryPid && isAlive(live.primaryPid))) return;
  const { engine, env } = deps;
  const old = live.primary;
  const standby = live.standby;
  deps.log.warn({ id: live.id, from: old.id, to: standby.id }, 'primary died: promoting');
  await engine.promote(env, standby);
  live.front.setTarget(standby.internalPort);
  const promoted: InstanceSpec = {
    ...standby,
    ...(old.archive ? { archive: { ...old.archive, sourceVolume: standby.volume } } : {}),
  };
  live.primary = promoted;
  live.standby = undefined;
  live.standbyPid = undefined;
  if (promoted.archive) {
    // A standby does not archive; as the primary it must, so it restarts configured so.
    await engine.stop(env, promoted, 'fast');
    await engine.start(env, promoted);
  }
  live.primaryPid = undefined;
  await deps.adopt(live, promoted);
  // Recorded before the dead primary goes: if this fails, its volume is kept.
  await deps.events.onFailover({ databaseId: live.id, promoted: standby.id, removed: old.id });
  await engine
    .destroy(env, old)
    .catch((err: unknown) => deps.log.warn({ err }, 'old primary not cleaned up'));
  await deps.dropCgroup(old.id);
}
