/**
 * Machines outlive a restart of pier (CONTRACT 1): on start the platform takes back what
 * runs and reconciles the rest with what it wants. A machine that should run but was
 * found stopped (it died, or the host rebooted) is started again; one that runs but
 * should not is stopped; a half-made one is left to its create job.
 */
import type { ServiceContext } from '../context.js';
import { creditBlocked } from '../billing/blocking.js';
import { endOrphanSessions } from './exec-sessions.js';
import { specOf } from './machines.js';
import { machinesQuery } from './records.js';
import { machineChanged } from './state-events.js';

export async function takeBackMachines(ctx: ServiceContext): Promise<void> {
  // Shell sessions lived in the pier that stopped: close them and kill what they left.
  await endOrphanSessions(ctx);
  const rows = await machinesQuery(ctx.db)
    .where('machines.host', '=', 'local')
    .where('machines.observed_state', 'in', [
      'running',
      'suspended',
      'stopped',
      'starting',
      'stopping',
      'suspending',
    ])
    .execute();
  if (rows.length === 0 || !ctx.machines) return;
  const runtime = ctx.machines;
  const running = new Set(await runtime.recover());
  for (const row of rows) {
    try {
      const status = await runtime.status(row.id);
      const alive = running.has(row.id);
      let observed = alive ? (status.state === 'suspended' ? 'suspended' : 'running') : 'stopped';
      // A blocked organization's machine stays down (spec 3: nothing new starts).
      if (row.desired_state === 'running' && !alive && !(await creditBlocked(ctx.db, row.org_id))) {
        await runtime.start(await specOf(ctx, row));
        observed = 'running';
        // The time it lay dead is not the customer's.
        await ctx.db
          .updateTable('machines')
          .set({ metered_at: new Date() })
          .where('id', '=', row.id)
          .execute();
      } else if (row.desired_state === 'stopped' && alive) {
        await runtime.stop(await specOf(ctx, row));
        observed = 'stopped';
      } else if (row.desired_state === 'suspended' && alive && observed === 'running') {
        await runtime.suspend(row.id);
        observed = 'suspended';
      }
      if (observed !== row.observed_state) {
        await ctx.db
          .updateTable('machines')
          .set({ observed_state: observed, updated_at: new Date() })
          .where('id', '=', row.id)
          .execute();
        // Waits and the proxy's kept machine lists hear of it at once.
        machineChanged(ctx, row.id);
      }
      ctx.log.info({ machine: row.id, observed }, 'machine taken back');
    } catch (err) {
      ctx.log.error({ err, machine: row.id }, 'machine could not be taken back');
    }
  }
}
