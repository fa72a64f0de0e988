/**
 * Machine actions (spec 4.9 `POST /v1/machines/:id/:action`): start, stop, suspend,
 * destroy, judged by `states.ts`. An action claims the machine by moving its observed
 * state to a transitional one with a conditional update, so a second action at the same
 * time is 409 `machine-busy`, not a race; then the runtime does the work.
 */
import { ApiError } from '../../errors/api-error.js';
import { MachineStartError } from '../../runtime/runtime.js';
import type { ServiceContext } from '../context.js';
import { SUSPEND_MAX_MEMORY_MB } from '../../host/sleep-policy.js';
import { specOf } from './machines.js';
import { machineChanged, machineTransition } from './state-events.js';
import { releaseVolumeLease, takeVolumeLease } from './volume-lease.js';
import { meterRunning } from './metering.js';
import { assertCreditOpen } from '../billing/blocking.js';
import type { Machine } from '../../contracts/machines.js';
import { configOf, findMachine, toMachine, type MachineRow } from './records.js';
import { TARGET, VIA, judge, type MachineAction, type MachineState } from './states.js';

/** The runtime of this host, or a 503 when machines cannot run here. */
export function runtimeOf(ctx: ServiceContext) {
  if (!ctx.machines) {
    throw new ApiError('host-unavailable', 'Machines cannot run on this host (see the log).');
  }
  return ctx.machines;
}

/** Sets the machine's observed state (and `more` columns), and says so to waiting requests. */
export async function setState(
  ctx: ServiceContext,
  id: string,
  observed: MachineState,
  more: Record<string, unknown> = {},
): Promise<void> {
  await ctx.db
    .updateTable('machines')
    .set({ observed_state: observed, updated_at: new Date(), ...more })
    .where('id', '=', id)
    .execute();
  machineChanged(ctx, id);
}

export async function machineAction(
  ctx: ServiceContext,
  orgId: string,
  id: string,
  action: MachineAction,
  /** The sleep policy puts machines to sleep without changing what is wanted: running. */
  opts: { keepDesired?: boolean } = {},
): Promise<Machine> {
  const row = await findMachine(ctx.db, orgId, id);
  const verdict = judge(action, row.observed_state as MachineState);
  if (verdict.kind === 'gone') throw new ApiError('not-found', `Machine '${id}' not found.`);
  if (verdict.kind === 'busy')
    throw new ApiError('machine-busy', `Machine ${id}: ${verdict.reason}.`);
  if (verdict.kind === 'conflict')
    throw new ApiError('conflict', `Machine ${id}: ${verdict.reason}.`);
  if (verdict.kind === 'noop') return toMachine(row);
  // Above 2048 MB a suspend would pin too much memory: the machine stops instead (spec 2.4).
  const effective: MachineAction =
    action === 'suspend' && configOf(row).memoryMb > SUSPEND_MAX_MEMORY_MB ? 'stop' : action;
  // Nothing starts or wakes for an organization whose credit is blocked (spec 3).
  if (effective === 'start') await assertCreditOpen(ctx.db, orgId);
  // Time up to a stop, suspend or destroy is booked while the machine is still `running`.
  if (effective !== 'start' && row.observed_state === 'running') await meterRunning(ctx.db, row.id);
  const claimed = await ctx.db
    .updateTable('machines')
    .set({
      observed_state: VIA[effective],
      ...(opts.keepDesired ? {} : { desired_state: TARGET[effective] }),
      updated_at: new Date(),
    })
    .where('id', '=', id)
    .where('observed_state', '=', row.observed_state)
    .executeTakeFirst();
  if (claimed.numUpdatedRows === 0n) {
    throw new ApiError('machine-busy', `Machine ${id}: another operation just began.`);
  }
  machineTransition(ctx, id);
  await perform(ctx, row, effective);
  return toMachine(await findMachine(ctx.db, orgId, id));
}

async function perform(ctx: ServiceContext, row: MachineRow, action: MachineAction) {
  const runtime = runtimeOf(ctx);
  if (action === 'start' && row.observed_state !== 'suspended') {
    // Another machine holding the volume keeps this one as it was: 503 lease-held.
    await takeVolumeLease(ctx.db, row).catch(async (err: unknown) => {
      await setState(ctx, row.id, row.observed_state as MachineState);
      throw err;
    });
  }
  try {
    if (action === 'destroy') {
      await runtime.destroy(row.id); // its checkpoints' disks too
      await ctx.db.deleteFrom('machine_checkpoints').where('machine_id', '=', row.id).execute();
      await releaseVolumeLease(ctx.db, row.id);
      await setState(ctx, row.id, 'deleted', { private_ip: null });
      return;
    }
    if (action === 'stop') {
      await runtime.stop(await specOf(ctx, row));
      await releaseVolumeLease(ctx.db, row.id);
      await setState(ctx, row.id, 'stopped');
      return;
    }
    if (action === 'suspend') {
      await runtime.suspend(row.id);
      await setState(ctx, row.id, 'suspended');
      return;
    }
    if (row.observed_state === 'suspended') {
      await runtime.resume(row.id);
      await setState(ctx, row.id, 'running', { metered_at: new Date() });
      return;
    }
    const { bootMs } = await runtime.start(await specOf(ctx, row));
    await setState(ctx, row.id, 'running', {
      boot_ms: bootMs,
      ready_at: new Date(),
      metered_at: new Date(),
    });
  } catch (err) {
    if (action === 'start') await releaseVolumeLease(ctx.db, row.id);
    const code = err instanceof MachineStartError ? err.code : 'host-refused';
    await setState(ctx, row.id, 'failed', {
      create_error: (err as Error).message,
      create_error_code: code,
      ...(err instanceof MachineStartError && err.bootLog ? { create_boot_log: err.bootLog } : {}),
    });
    throw new ApiError(code, (err as Error).message);
  }
}
