/**
 * Machine rows and the record of spec 2.11, and lookups scoped by organization (another
 * organization's machine answers exactly like a missing one).
 */
import type { Selectable } from 'kysely';
import type { Machine, MachineConfig } from '../../contracts/machines.js';
import { ApiError } from '../../errors/api-error.js';
import type { Executor } from '../../store/db.js';
import type { MachinesTable } from '../../store/schema.js';

export type MachineRow = Selectable<MachinesTable> & { app_name: string };

export function toMachine(r: MachineRow): Machine {
  return {
    id: r.id,
    appName: r.app_name,
    config: configOf(r),
    desiredState: r.desired_state as Machine['desiredState'],
    observedState: r.observed_state as Machine['observedState'],
    host: r.host,
    ...(r.private_ip ? { privateIp: r.private_ip } : {}),
    region: r.region,
    ...(r.ready_at ? { readyAt: r.ready_at.toISOString() } : {}),
    ...(r.checkpoint_at ? { checkpointAt: r.checkpoint_at.toISOString() } : {}),
    ...(r.liveness ? { liveness: r.liveness } : {}),
    ...(r.liveness_reason ? { livenessReason: r.liveness_reason } : {}),
    ...(r.liveness_since ? { livenessSince: r.liveness_since.toISOString() } : {}),
    ...(r.liveness_at ? { livenessAt: r.liveness_at.toISOString() } : {}),
    ...(r.create_error ? { createError: r.create_error } : {}),
    ...(r.create_error_code ? { createErrorCode: r.create_error_code } : {}),
    ...(r.create_boot_log ? { createBootLog: r.create_boot_log } : {}),
    ...(r.create_warning ? { createWarning: r.create_warning } : {}),
    createdAt: r.created_at.toISOString(),
    ...(r.boot_ms !== null ? { bootMs: r.boot_ms } : {}),
    restarts: r.restarts,
  };
}

export function configOf(r: MachineRow): MachineConfig {
  return r.config as unknown as MachineConfig;
}

export function machinesQuery(ex: Executor) {
  return ex
    .selectFrom('machines')
    .innerJoin('apps', 'apps.id', 'machines.app_id')
    .selectAll('machines')
    .select('apps.name as app_name');
}

/** The machine of `orgId` with this id, or 404 `machine-not-found`-style not-found. */
export async function findMachine(ex: Executor, orgId: string, id: string): Promise<MachineRow> {
  const row = await machinesQuery(ex)
    .where('machines.org_id', '=', orgId)
    .where('machines.id', '=', id)
    .executeTakeFirst();
  if (!row) throw new ApiError('not-found', `Machine '${id}' not found.`);
  return row;
}

/** Ids of the app's machines that are not destroyed, oldest first. */
export async function liveMachineIds(ex: Executor, appId: string): Promise<string[]> {
  const rows = await ex
    .selectFrom('machines')
    .select('id')
    .where('app_id', '=', appId)
    .where('observed_state', '<>', 'deleted')
    .orderBy('created_at')
    .execute();
  return rows.map((r) => r.id);
}
