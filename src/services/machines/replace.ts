/**
 * A deploy-style replace (`POST /v1/apps/:name/machines?replace=<id>`): the new machine
 * takes the place of an old one of the same app, which is what lets an app with a volume
 * (one machine only) move to a new image. The old machine stops first, so the volume is
 * free for the new one; once the new one runs, the old one is destroyed; if the new one
 * fails, the old one is started again, as a deploy rolls back. Each step is an idempotent
 * machine action, so the create job that runs them can be rerun after a crash.
 */
import { ApiError } from '../../errors/api-error.js';
import type { ServiceContext } from '../context.js';
import { machineAction } from './lifecycle.js';

/** Stops the machine being replaced (already stopped is fine). */
export async function stopReplaced(ctx: ServiceContext, orgId: string, oldId: string) {
  await machineAction(ctx, orgId, oldId, 'stop').catch((err: unknown) => {
    // Gone already (a rerun after the destroy) is what the replace wanted.
    if (err instanceof ApiError && err.code === 'not-found') return;
    throw err;
  });
}

/** After the new machine ran (destroy the old) or failed (start the old again). */
export async function finishReplace(
  ctx: ServiceContext,
  orgId: string,
  oldId: string,
  succeeded: boolean,
): Promise<void> {
  await machineAction(ctx, orgId, oldId, succeeded ? 'destroy' : 'start').catch((err: unknown) =>
    ctx.log.warn({ err, machine: oldId, succeeded }, 'replaced machine not settled'),
  );
}
