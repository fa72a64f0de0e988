/**
 * Failover of host-redundant databases, run by the host's watchdog: a primary whose
 * process died is replaced by its synchronous standby behind the same front; a standby
 * that died is let go of, so the primary's commits stop waiting for it, and rebuilt.
 */
import { readFileSync } from 'node:fs';
import type { Logger } from 'pino';
import type { Db } from '../../store/db.js';
import type { InstanceSpec } from '../engine.js';
import type { DatabaseHost, LiveDatabase } from './database-host.js';

/** What failover needs besides the host: the store, a logger, and who rebuilds standbys. */
export interface RedundancyDeps {
  db: Db;
  log: Logger;
  onFailover?: (databaseId: string) => Promise<void>;
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

export async function loseStandby(
  host: DatabaseHost,
  deps: RedundancyDeps,
  live: LiveDatabase,
): Promise<void> {
  if (!live.primary || !live.standbyPid || isAlive(live.standbyPid)) return;
  deps.log.warn({ id: live.id, standby: live.standby?.id }, 'standby died: rebuilding');
  live.standbyPid = undefined;
  await host.postgres().detachStandby?.(await host.env(), live.primary);
  // The rebuild (a durable job) starts it again and makes the primary wait for it anew.
  await deps.onFailover?.(live.id);
}

export async function failover(
  host: DatabaseHost,
  deps: RedundancyDeps,
  live: LiveDatabase,
): Promise<void> {
  if (!live.standby || !live.primary || (live.primaryPid && isAlive(live.primaryPid))) return;
  const env = await host.env();
  const old = live.primary;
  const standby = live.standby;
  deps.log.warn({ id: live.id, from: old.id, to: standby.id }, 'primary died: promoting');
  await host.postgres().promote(env, standby);
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
    await host.postgres().stop(env, promoted, 'fast');
    await host.postgres().start(env, promoted);
  }
  live.primaryPid = undefined;
  await host.adopt(live, promoted);
  await deps.db.transaction().execute(async (tx) => {
    await tx.deleteFrom('database_instances').where('id', '=', old.id).execute();
    await tx
      .updateTable('database_instances')
      .set({ role: 'primary' })
      .where('id', '=', standby.id)
      .execute();
  });
  await host
    .postgres()
    .destroy(env, old)
    .catch((err: unknown) => deps.log.warn({ err }, 'old primary not cleaned up'));
  await host.dropCgroup(old.id);
  await deps.onFailover?.(live.id);
}
