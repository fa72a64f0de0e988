/**
 * A volume belongs to at most one app (CONTRACT 3 attach/detach, spec 4.4 DELETE
 * attachment): the app's machine mounts it at `mountPath`. A volume held by a running
 * machine cannot be detached; stop the machine first.
 */
import type { VolumeAttachment } from '../../contracts/volumes.js';
import { ApiError, notFound } from '../../errors/api-error.js';
import type { Executor } from '../../store/db.js';
import { findApp } from '../apps/records.js';
import type { ServiceContext } from '../context.js';
import { findVolume, type VolumeRow } from './volumes.js';

async function volumeByName(ex: Executor, orgId: string, name: string): Promise<VolumeRow> {
  const row = await ex
    .selectFrom('volumes')
    .select('id')
    .where('org_id', '=', orgId)
    .where('name', '=', name)
    .executeTakeFirst();
  if (!row) throw notFound(`Volume '${name}'`);
  return findVolume(ex, orgId, row.id);
}

export async function attachVolume(
  ctx: ServiceContext,
  orgId: string,
  appName: string,
  volumeName: string,
): Promise<VolumeAttachment> {
  return ctx.db.transaction().execute(async (tx) => {
    const app = await findApp(tx, orgId, appName, { lock: true });
    const v = await volumeByName(tx, orgId, volumeName);
    if (v.app_id === app.id) {
      throw new ApiError(
        'already-attached',
        `The volume '${volumeName}' is already attached to '${appName}'.`,
      );
    }
    if (v.app_id) {
      throw new ApiError(
        'volume-attached',
        `The volume '${volumeName}' is attached to the app '${v.app_name}'; detach it first.`,
      );
    }
    await tx.updateTable('volumes').set({ app_id: app.id }).where('id', '=', v.id).execute();
    return { appName, volumeName, mountPath: v.mount_path };
  });
}

/** Detaches `volume` from its app (from `appName`, when given: else 404 not-attached). */
export async function detachVolume(
  ctx: ServiceContext,
  orgId: string,
  volume: { id?: string; name?: string },
  appName?: string,
): Promise<VolumeAttachment> {
  return ctx.db.transaction().execute(async (tx) => {
    const v = volume.id
      ? await findVolume(tx, orgId, volume.id)
      : await volumeByName(tx, orgId, volume.name!);
    const app = appName ? await findApp(tx, orgId, appName, { lock: true }) : undefined;
    if (!v.app_id || (app && v.app_id !== app.id)) {
      throw new ApiError(
        'not-attached',
        `The volume '${v.name}' is not attached to ${app ? `'${appName}'` : 'an app'}.`,
      );
    }
    if (v.machine_id) {
      throw new ApiError(
        'conflict',
        `The volume '${v.name}' is in use by the machine ${v.machine_id}; stop it first.`,
      );
    }
    await tx.updateTable('volumes').set({ app_id: null }).where('id', '=', v.id).execute();
    return { appName: v.app_name ?? appName ?? '', volumeName: v.name, mountPath: v.mount_path };
  });
}
