/**
 * Deleting an app destroys its machines first (CONTRACT: `DELETE /v1/apps/:name`). Their
 * rows go with the app's (ON DELETE CASCADE), so a machine still running then would run on
 * with nothing left to stop it, and its cgroup, network namespace and disks would never be
 * reclaimed.
 */
import { ApiError } from '../../errors/api-error.js';
import { findApp } from '../apps.js';
import type { ServiceContext } from '../context.js';
import { machineAction } from './lifecycle.js';

/**
 * Destroys every machine of the app that is not destroyed yet, one at a time. A machine in
 * the middle of another operation answers 409 `machine-busy`, and the app stays as it was,
 * less the machines already destroyed: the client tries again.
 */
export async function destroyAppMachines(
  ctx: ServiceContext,
  orgId: string,
  appName: string,
): Promise<void> {
  const app = await findApp(ctx.db, orgId, appName);
  const machines = await ctx.db
    .selectFrom('machines')
    .select('id')
    .where('app_id', '=', app.id)
    .where('observed_state', '!=', 'deleted')
    .execute();
  for (const m of machines) {
    try {
      await machineAction(ctx, orgId, m.id, 'destroy');
    } catch (err) {
      // Destroyed meanwhile by another request: what this one wanted.
      if (!(err instanceof ApiError && err.code === 'not-found')) throw err;
    }
  }
}
