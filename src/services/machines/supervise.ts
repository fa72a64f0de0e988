/**
 * The restart policy (spec 2.12 `restart`): a machine whose process ended on its own is
 * restarted when the policy says so — always when the config has no `restart` object,
 * never with `never`, and with `on-failure` while it exits non-zero and has restarts left
 * (`retries`, default 3). Otherwise it ends `stopped` (exit 0) or `failed` (the exit code
 * in `createError`). A tick claims each machine with a conditional update, so an action
 * in flight (stop, destroy) is never overtaken.
 */
import type { ServiceContext } from '../context.js';
import { specOf } from './machines.js';
import { meterRunning } from './metering.js';
import { creditBlocked } from '../billing/blocking.js';
import { configOf, machinesQuery, type MachineRow } from './records.js';
import { everyInterval } from '../ticker.js';
import { machineChanged } from './state-events.js';

/** Whether a machine whose process exited with `code` restarts under its policy. */
export function shouldRestart(row: MachineRow, code: number | null): boolean {
  const policy = configOf(row).restart;
  if (!policy) return true;
  if ((policy.policy ?? 'never') === 'never') return false;
  return code !== 0 && row.restarts < (policy.retries ?? 3);
}

export async function superviseTick(ctx: ServiceContext): Promise<void> {
  if (!ctx.machines) return;
  const rows = await machinesQuery(ctx.db)
    .where('machines.host', '=', 'local')
    .where('machines.observed_state', '=', 'running')
    .execute();
  for (const row of rows) {
    const status = await ctx.machines.status(row.id).catch(() => undefined);
    if (!status || status.state !== 'stopped') continue;
    await meterRunning(ctx.db, row.id);
    const code = status.exit?.code ?? null;
    // A blocked organization's machine is not restarted (spec 3: nothing new starts).
    const restart = shouldRestart(row, code) && !(await creditBlocked(ctx.db, row.org_id));
    const claimed = await ctx.db
      .updateTable('machines')
      .set({
        observed_state: restart ? 'starting' : code === 0 ? 'stopped' : 'failed',
        updated_at: new Date(),
      })
      .where('id', '=', row.id)
      .where('observed_state', '=', 'running')
      .executeTakeFirst();
    if (claimed.numUpdatedRows === 0n) continue;
    // Waits and the proxy's kept machine lists hear of it at once, not at their next look.
    machineChanged(ctx, row.id);
    if (!restart) {
      await ctx.db
        .updateTable('machines')
        .set({
          desired_state: code === 0 ? 'stopped' : 'running',
          ...(code === 0
            ? {}
            : {
                create_error: `the process exited with code ${code}`,
                create_error_code: 'guest-exited',
              }),
        })
        .where('id', '=', row.id)
        .execute();
      ctx.log.info({ machine: row.id, code }, 'machine ended; its policy does not restart it');
      continue;
    }
    try {
      await ctx.machines.start(await specOf(ctx, row));
      await ctx.db
        .updateTable('machines')
        .set((eb) => ({
          observed_state: 'running',
          restarts: eb('restarts', '+', 1),
          metered_at: new Date(),
          updated_at: new Date(),
        }))
        .where('id', '=', row.id)
        .execute();
      machineChanged(ctx, row.id);
      ctx.log.info({ machine: row.id, code }, 'machine restarted by its policy');
    } catch (err) {
      await ctx.db
        .updateTable('machines')
        .set({
          observed_state: 'failed',
          create_error: (err as Error).message,
          updated_at: new Date(),
        })
        .where('id', '=', row.id)
        .execute();
      machineChanged(ctx, row.id);
    }
  }
}

/** Runs the restart policy every `everyMs`; returns a stopper. */
export function scheduleSupervision(ctx: ServiceContext, everyMs = 1000): () => void {
  return everyInterval(ctx.log, 'machine supervision', everyMs, () => superviseTick(ctx));
}
