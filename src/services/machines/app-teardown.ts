/**
 * `DELETE /v1/apps/:name` (CONTRACT): destroys the app's machines, then deletes the app.
 * Machine rows go with the app's (ON DELETE CASCADE), so a machine still running then would
 * run on with nothing left to stop it, and its cgroup, network namespace and disks would
 * never be reclaimed.
 */
import { ApiError } from '../../errors/api-error.js';
import { deleteApp, findApp } from '../apps.js';
import type { ServiceContext } from '../context.js';
import { machineAction } from './lifecycle.js';
import { liveMachineIds } from './records.js';

/**
 * Destroys every machine of the app that is not destroyed yet, one at a time, then deletes
 * the app. A machine in the middle of another operation answers 409 `machine-busy`, and the
 * app stays as it was, less the machines already destroyed: the client tries again.
 */
export async function deleteAppAndMachines(
  ctx: ServiceContext,
  orgId: string,
  appName: string,
): Promise<void> {
  const app = await findApp(ctx.db, orgId, appName);
  for (const id of await liveMachineIds(ctx.db, app.id)) {
    try {
      await machineAction(ctx, orgId, id, 'destroy');
    } catch (err) {
      // Destroyed meanwhile by another request: what this one wanted.
      if (!(err instanceof ApiError && err.code === 'not-found')) throw err;
    }
  }
  await deleteApp(ctx, orgId, appName);
}
