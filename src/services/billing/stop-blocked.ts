/**
 * When credit blocks an organization, its machines and databases stop (spec 1 behaviour
 * 4, spec 3, 4.3: a database is a machine too): a durable job enqueued in the
 * transaction that blocked it (a booking, or the projected balance's check), so a crash
 * between the block and the stops only delays them. Machines are stopped, not deleted:
 * their desired state becomes `stopped`, so nothing restarts them on its own after a
 * grant; the customer starts them again. Databases are stopped with their data kept;
 * their fronts refuse to wake them while the block lasts, and the first connection after
 * it wakes them as any sleeping database. A machine in the middle of another action is
 * tried again by the job's retry.
 */
import { z } from 'zod';
import { ApiError } from '../../errors/api-error.js';
import { defineJob, exponentialBackoff } from '../../jobs/catalogue.js';
import type { ServiceContext } from '../context.js';
import { machineAction } from '../machines/lifecycle.js';
import { creditBlocked } from './blocking.js';

export const STOP_BLOCKED_JOB = 'billing.stop-blocked';

/** States a blocked organization's machine leaves by a stop. */
const STOPPABLE = ['running', 'suspended', 'starting', 'stopping', 'suspending'];

export async function stopBlocked(ctx: ServiceContext, orgId: string): Promise<number> {
  // Credit added in the meantime: nothing to stop.
  if (!(await creditBlocked(ctx.db, orgId))) return 0;
  const databases = await ctx.db
    .selectFrom('databases')
    .select('id')
    .where('org_id', '=', orgId)
    .where('power', '<>', 'stopped')
    .execute();
  for (const { id } of databases) await ctx.databases.stop(id);
  const rows = await ctx.db
    .selectFrom('machines')
    .select('id')
    .where('org_id', '=', orgId)
    .where('observed_state', 'in', STOPPABLE)
    .execute();
  let busy = 0;
  for (const { id } of rows) {
    await machineAction(ctx, orgId, id, 'stop').catch((err: unknown) => {
      if (err instanceof ApiError && err.code === 'machine-busy') busy++;
      else ctx.log.warn({ err, machine: id }, 'a blocked organization’s machine did not stop');
    });
  }
  if (busy > 0) throw new Error(`${busy} machine(s) busy; the stop is tried again`);
  return databases.length + rows.length;
}

export function stopBlockedJob(get: () => ServiceContext) {
  return defineJob({
    kind: STOP_BLOCKED_JOB,
    payload: z.object({ orgId: z.string() }),
    maxAttempts: 20,
    backoffMs: exponentialBackoff(1000, 60_000),
    async run({ orgId }) {
      await stopBlocked(get(), orgId);
    },
  });
}
