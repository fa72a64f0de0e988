/**
 * The checks every way into a running machine shares (files, shell sessions: spec 7.6):
 * the machine is the organization's (else 404 `machine-not-found`, as for a missing
 * one), it is not being started or stopped, it runs; a suspended one is woken when the
 * caller asks for it (a shell), and otherwise left asleep (files are read from the host).
 */
import { ApiError } from '../../errors/api-error.js';
import type { GuestProcess } from '../../runtime/runtime.js';
import type { ServiceContext } from '../context.js';
import { machineAction, runtimeOf } from './lifecycle.js';
import { findMachine, type MachineRow } from './records.js';

const STOPPED = new Set(['stopped', 'failed', 'deleted', 'requested', 'scheduled']);

/** The machine row, or 404 `machine-not-found`. */
export async function guestMachine(
  ctx: ServiceContext,
  orgId: string,
  id: string,
): Promise<MachineRow> {
  try {
    return await findMachine(ctx.db, orgId, id);
  } catch (err) {
    if (err instanceof ApiError && err.code === 'not-found') {
      throw new ApiError('machine-not-found', `No machine '${id}' in this organization.`);
    }
    throw err;
  }
}

/** The machine's running process, after the checks above. */
export async function reachGuest(
  ctx: ServiceContext,
  row: MachineRow,
  opts: { wake: boolean },
): Promise<GuestProcess> {
  const state = row.observed_state;
  if (state === 'deleted') {
    throw new ApiError('machine-not-found', `No machine '${row.id}' in this organization.`);
  }
  if (STOPPED.has(state)) {
    throw new ApiError('machine-stopped', `Machine ${row.id} is ${state}; start it first.`);
  }
  if (state !== 'running' && state !== 'suspended') {
    throw new ApiError('machine-busy', `Machine ${row.id} is ${state}; try again shortly.`);
  }
  if (state === 'suspended' && opts.wake) {
    await machineAction(ctx, row.org_id, row.id, 'start', { keepDesired: true }).catch(
      (err: unknown) => {
        if (err instanceof ApiError && err.code === 'machine-busy') throw err;
        throw new ApiError(
          'machine-suspended-no-wake',
          `Machine ${row.id} is suspended and could not be woken: ${(err as Error).message}`,
        );
      },
    );
  }
  const guest = await runtimeOf(ctx).guest(row.id);
  if (!guest) {
    throw new ApiError('machine-stopped', `Machine ${row.id} is not running; start it first.`);
  }
  return guest;
}
