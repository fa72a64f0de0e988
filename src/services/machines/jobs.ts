/**
 * Durable jobs of machines: making a machine on the host. A rerun after a crash calls the
 * runtime's idempotent create again and finishes the machine or fails it with the cause.
 */
import { z } from 'zod';
import { defineJob, exponentialBackoff } from '../../jobs/catalogue.js';
import { crashPoint } from '../../jobs/crash-points.js';
import { ApiError } from '../../errors/api-error.js';
import { MachineStartError } from '../../runtime/runtime.js';
import type { ServiceContext } from '../context.js';
import { runtimeOf } from './lifecycle.js';
import { assertCreditOpen } from '../billing/blocking.js';
import { specOf } from './machines.js';
import { machinesQuery } from './records.js';
import { finishReplace, stopReplaced } from './replace.js';
import { machineChanged } from './state-events.js';
import { releaseVolumeLease, takeVolumeLease } from './volume-lease.js';

export function machineJobs(get: () => ServiceContext) {
  return [
    defineJob({
      kind: 'machines.create',
      payload: z.object({ machineId: z.string(), replaces: z.string().optional() }),
      maxAttempts: 3,
      backoffMs: exponentialBackoff(2000),
      async run({ machineId, replaces }, job) {
        const ctx = get();
        const row = await machinesQuery(ctx.db)
          .where('machines.id', '=', machineId)
          .executeTakeFirst();
        if (!row || !['requested', 'scheduled', 'starting'].includes(row.observed_state)) return;
        await ctx.db
          .updateTable('machines')
          .set({ observed_state: 'starting', updated_at: new Date() })
          .where('id', '=', machineId)
          .execute();
        try {
          // Blocked by credit while it waited: it fails with `credit-blocked`, not starts.
          await assertCreditOpen(ctx.db, row.org_id);
          // A deploy-style replace: the old machine stops (and lets go of the volume) first.
          if (replaces) await stopReplaced(ctx, row.org_id, replaces);
          await takeVolumeLease(ctx.db, row);
          // The job has no recorded steps: the test-only crash points mark its middle.
          await crashPoint('machines.create', 'leased', job.attempt);
          const { bootMs, privateIp } = await runtimeOf(ctx).create(await specOf(ctx, row), {
            signal: job.signal,
          });
          await crashPoint('machines.create', 'created', job.attempt);
          await ctx.db
            .updateTable('machines')
            .set({
              observed_state: 'running',
              boot_ms: bootMs,
              private_ip: privateIp,
              ready_at: new Date(),
              metered_at: new Date(),
              updated_at: new Date(),
            })
            .where('id', '=', machineId)
            .execute();
          machineChanged(ctx, machineId);
          if (replaces) await finishReplace(ctx, row.org_id, replaces, true);
        } catch (err) {
          // Interrupted by shutdown: the next try resumes it.
          if (job.signal.aborted) throw err;
          await releaseVolumeLease(ctx.db, machineId);
          const start = err instanceof MachineStartError ? err : undefined;
          const code = start?.code ?? (err instanceof ApiError ? err.code : 'create-failed');
          await ctx.db
            .updateTable('machines')
            .set({
              observed_state: 'failed',
              create_error: (err as Error).message.slice(0, 2000),
              create_error_code: code,
              create_boot_log: start?.bootLog ? start.bootLog.slice(-64 * 1024) : null,
              updated_at: new Date(),
            })
            .where('id', '=', machineId)
            .execute();
          machineChanged(ctx, machineId);
          if (replaces) await finishReplace(ctx, row.org_id, replaces, false);
        }
      },
    }),
  ];
}
