/**
 * The sleep policy of machines (spec 2.4, 2.12 `suspendPolicy`): a machine that served
 * no proxied request for `idleSeconds` is suspended (frozen, memory kept) or, with mode
 * `stop` or above 2048 MB, stopped; `stopAfterSeconds` stops a suspended one. The proxy
 * wakes it on the next request. Without a policy a machine never sleeps. The same rule as
 * databases (engines/host/sleep-policy.ts) decides.
 *
 * Activity is proxied requests (and the moment the machine became ready); the machine's
 * CPU use is not measured yet, so a busy machine that serves no HTTP can be put to sleep
 * if its app sets a policy.
 */
import { sleepAction } from '../../engines/host/sleep-policy.js';
import type { ServiceContext } from '../context.js';
import { machineAction } from './lifecycle.js';
import { configOf, machinesQuery } from './records.js';

/** When each machine last served a proxied request (ms), shared by the proxy and the ticker. */
export const machineActivity = new WeakMap<ServiceContext, Map<string, number>>();

export function activityOf(ctx: ServiceContext): Map<string, number> {
  let map = machineActivity.get(ctx);
  if (!map) machineActivity.set(ctx, (map = new Map()));
  return map;
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
  let running = false;
  const timer = setInterval(() => {
    if (running) return;
    running = true;
    machineSleepTick(ctx)
      .catch((err: unknown) => ctx.log.warn({ err }, 'machine sleep tick failed'))
      .finally(() => (running = false));
  }, everyMs);
  timer.unref();
  return () => clearInterval(timer);
}
