/**
 * Durable jobs of machines: making a machine on the host. A rerun after a crash calls the
 * runtime's idempotent create again and finishes the machine or fails it with the cause.
 */
import { z } from 'zod';
import { defineJob, exponentialBackoff } from '../../jobs/catalogue.js';
import { MachineStartError } from '../../runtime/runtime.js';
import type { ServiceContext } from '../context.js';
import { runtimeOf } from './lifecycle.js';
import { specOf } from './machines.js';
import { machinesQuery } from './records.js';

export function machineJobs(get: () => ServiceContext) {
  return [
    defineJob({
      kind: 'machines.create',
      payload: z.object({ machineId: z.string() }),
      maxAttempts: 3,
      backoffMs: exponentialBackoff(2000),
      async run({ machineId }, job) {
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
          const { bootMs, privateIp } = await runtimeOf(ctx).create(await specOf(ctx, row), {
            signal: job.signal,
          });
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
        } catch (err) {
          // Interrupted by shutdown: the next try resumes it.
          if (job.signal.aborted) throw err;
          const start = err instanceof MachineStartError ? err : undefined;
          await ctx.db
            .updateTable('machines')
            .set({
              observed_state: 'failed',
              create_error: (err as Error).message.slice(0, 2000),
              create_error_code: start?.code ?? 'create-failed',
              create_boot_log: start?.bootLog ? start.bootLog.slice(-64 * 1024) : null,
              updated_at: new Date(),
            })
            .where('id', '=', machineId)
            .execute();
        }
      },
    }),
  ];
}
