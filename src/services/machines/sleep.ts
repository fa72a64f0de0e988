/**
 * The sleep policy of machines (spec 2.4, 2.12 `suspendPolicy`): a machine that served
 * no proxied request for `idleSeconds` is suspended (frozen, memory kept) or, with mode
 * `stop` or above 2048 MB, stopped; `stopAfterSeconds` stops a suspended one. The proxy
 * wakes it on the next request. Without a policy a machine never sleeps. The same rule as
 * databases (host/sleep-policy.ts) decides.
 *
 * Activity is proxied requests (and the moment the machine became ready), and CPU: a
 * machine that used more than 5% of a CPU between two ticks (its processes' CPU time,
 * read from /proc) is busy, so a worker that serves no HTTP is not put to sleep.
 */
import { sleepAction } from '../../host/sleep-policy.js';
import type { ServiceContext } from '../context.js';
import { machineAction, runtimeOf } from './lifecycle.js';
import { configOf, machinesQuery } from './records.js';
import { everyInterval } from '../ticker.js';

/** When each machine last served a proxied request (ms), shared by the proxy and the ticker. */
export function activityOf(ctx: ServiceContext): Map<string, number> {
  return ctx.memory.machineRequests;
}

/** A machine using more than this share of one CPU since the last tick is not idle. */
export const BUSY_CPU_SHARE = 0.05;

/** Whether the machine used more than BUSY_CPU_SHARE of a CPU since the previous tick. */
async function busyOnCpu(ctx: ServiceContext, id: string, now: number): Promise<boolean> {
  const seen = ctx.memory.machineCpuSeen;
  const cpuMs = await runtimeOf(ctx).cpuTime(id);
  const before = seen.get(id);
  if (cpuMs === undefined) {
    seen.delete(id);
    return false;
  }
  seen.set(id, { cpuMs, at: now });
  if (!before || now <= before.at) return false;
  return (cpuMs - before.cpuMs) / (now - before.at) > BUSY_CPU_SHARE;
}

export async function machineSleepTick(ctx: ServiceContext, now = Date.now()): Promise<void> {
  const rows = await machinesQuery(ctx.db)
    .where('machines.host', '=', 'local')
    .where('machines.observed_state', 'in', ['running', 'suspended'])
    .execute();
  const activity = activityOf(ctx);
  for (const row of rows) {
    const config = configOf(row);
    if (config.suspendPolicy.mode === 'off') continue;
    if (row.observed_state === 'running' && (await busyOnCpu(ctx, row.id, now))) {
      activity.set(row.id, now);
    }
    const since = Math.max(
      activity.get(row.id) ?? 0,
      (row.ready_at ?? row.created_at).getTime(),
      row.updated_at.getTime(),
    );
    const action = sleepAction({
      policy: config.suspendPolicy,
      memoryMb: config.memoryMb,
      power: row.observed_state === 'suspended' ? 'suspended' : 'running',
      idleMs: now - since,
      canFreeze: true,
    });
    if (action === 'none') continue;
    await machineAction(ctx, row.org_id, row.id, action, { keepDesired: true }).catch(
      (err: unknown) => ctx.log.warn({ err, machine: row.id }, 'machine did not go to sleep'),
    );
  }
}

/** Applies the sleep policy every `everyMs`; returns a stopper. */
export function scheduleMachineSleep(ctx: ServiceContext, everyMs = 1000): () => void {
  return everyInterval(ctx.log, 'machine sleep tick', everyMs, () => machineSleepTick(ctx));
}
