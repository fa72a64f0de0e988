/**
 * Volume leases (spec 2.6): while a machine has its volume mounted, the volume names the
 * machine (`machineId`) and the host (`leaseHost`), and `leaseGen` counts the leases
 * taken. A machine takes the lease before its process starts and gives it back when it
 * stops or is destroyed; a machine that finds the lease held by another one does not
 * start: 503 `lease-held`, retry shortly. Taking it is one conditional update, so two
 * machines can never both mount one volume.
 */
import { ApiError } from '../../errors/api-error.js';
import type { Executor } from '../../store/db.js';
import type { MachineRow } from './records.js';

/** The host machines run on (one per installation for now). */
export const LEASE_HOST = 'local';

/** Takes the lease of the machine's volume, if it has one; 503 `lease-held` when another holds it. */
export async function takeVolumeLease(ex: Executor, row: MachineRow): Promise<void> {
  if (!row.volume_id) return;
  const taken = await ex
    .updateTable('volumes')
    .set((eb) => ({
      machine_id: row.id,
      lease_host: LEASE_HOST,
      lease_gen: eb('lease_gen', '+', 1),
    }))
    .where('id', '=', row.volume_id)
    .where((eb) => eb.or([eb('machine_id', 'is', null), eb('machine_id', '=', row.id)]))
    .executeTakeFirst();
  if (taken.numUpdatedRows > 0n) return;
  const holder = await ex
    .selectFrom('volumes')
    .select(['name', 'machine_id', 'lease_host'])
    .where('id', '=', row.volume_id)
    .executeTakeFirst();
  if (!holder) return; // the volume is gone: the runtime says so when it mounts
  throw new ApiError(
    'lease-held',
    `The volume '${holder.name}' is held by the machine ${holder.machine_id} on ${holder.lease_host ?? 'a host'}; stop that machine, or retry shortly.`,
  );
}

/** Gives back whatever volume lease the machine holds. */
export async function releaseVolumeLease(ex: Executor, machineId: string): Promise<void> {
  await ex
    .updateTable('volumes')
    .set({ machine_id: null, lease_host: null })
    .where('machine_id', '=', machineId)
    .execute();
}
