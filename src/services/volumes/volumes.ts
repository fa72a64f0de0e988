/**
 * Volumes (spec 2.6, 4.4): named in the platform-wide namespace, each a subvolume of the
 * host's storage pool with a quota of `sizeGb`. The row and the name commit first; the
 * pool volume is made right after, and a failure removes both again, so a create either
 * answers 201 with a volume that exists or leaves nothing.
 */
import type { Selectable } from 'kysely';
import type { CreateVolumeBody, UpdateVolumeBody, Volume } from '../../contracts/volumes.js';
import { newId } from '../../crypto/tokens.js';
import { ApiError, notFound } from '../../errors/api-error.js';
import { enqueue } from '../../jobs/queue.js';
import { PoolError } from '../../storage/pool/pool.js';
import type { Executor } from '../../store/db.js';
import type { VolumesTable } from '../../store/schema.js';
import type { ServiceContext } from '../context.js';
import { claimName, releaseName } from '../names.js';
import { assertOrgRoom, lockOrg } from '../org-limits.js';

const GiB = 1024 ** 3;

export type VolumeRow = Selectable<VolumesTable> & { app_name?: string | null };

export function toVolume(r: VolumeRow): Volume {
  return {
    id: r.id,
    name: r.name,
    orgId: r.org_id,
    sizeGb: r.size_gb,
    mountPath: r.mount_path,
    class: r.class,
    flushIntervalS: r.flush_interval_s,
    ...(r.machine_id ? { machineId: r.machine_id } : {}),
    ...(r.app_name ? { appName: r.app_name } : {}),
    ...(r.lease_host ? { leaseHost: r.lease_host } : {}),
    leaseGen: r.lease_gen,
    durableGen: r.durable_gen,
    ...(r.durable_at ? { durableAt: r.durable_at.toISOString() } : {}),
    ...(r.wal_durable_at ? { walDurableAt: r.wal_durable_at.toISOString() } : {}),
    createdAt: r.created_at.toISOString(),
  };
}

function volumesOf(ex: Executor) {
  return ex
    .selectFrom('volumes')
    .leftJoin('apps', 'apps.id', 'volumes.app_id')
    .selectAll('volumes')
    .select('apps.name as app_name');
}

/** The volume of `orgId` with this id, or 404 (also when another organization has it). */
export async function findVolume(ex: Executor, orgId: string, id: string): Promise<VolumeRow> {
  const row = await volumesOf(ex)
    .where('volumes.org_id', '=', orgId)
    .where('volumes.id', '=', id)
    .executeTakeFirst();
  if (!row) throw notFound(`Volume '${id}'`);
  return row;
}

/** The pool volume of a volume: `v-` and the id's random part. */
function poolNameOf(id: string): string {
  return `v-${id.replace(/^vol-/, '')}`;
}

function noRoom(err: unknown): ApiError | undefined {
  if (err instanceof PoolError && err.code === 'no-space') {
    return new ApiError('no-capacity', `No room in the host's storage pool: ${err.message}`);
  }
  return undefined;
}

export async function createVolume(
  ctx: ServiceContext,
  orgId: string,
  body: CreateVolumeBody,
): Promise<Volume> {
  const id = newId('vol');
  const sizeGb = body.sizeGb ?? 10;
  const cls = body.class ?? 'standard';
  const row = await ctx.db.transaction().execute(async (tx) => {
    // Counted under the org row's lock; the pool volume is made only after the commit.
    await assertOrgRoom(tx, orgId, { storageGb: sizeGb });
    await claimName(tx, orgId, body.name, 'volume');
    return tx
      .insertInto('volumes')
      .values({
        id,
        org_id: orgId,
        name: body.name,
        size_gb: sizeGb,
        mount_path: body.mountPath ?? '/data',
        class: cls,
        flush_interval_s: body.flushIntervalS ?? 86_400,
        pool_volume: poolNameOf(id),
        app_id: null,
        machine_id: null,
        lease_host: null,
        created_at: ctx.clock(),
      })
      .returningAll()
      .executeTakeFirstOrThrow();
  });
  try {
    const { pool } = await ctx.pool.get();
    await pool.create(row.pool_volume, { quotaBytes: sizeGb * GiB });
  } catch (err) {
    await removeVolumeRow(ctx, orgId, id);
    throw noRoom(err) ?? err;
  }
  if (cls === 'durable') await scheduleFlush(ctx, row.id, row.flush_interval_s);
  return toVolume(row);
}

export async function listVolumes(ctx: ServiceContext, orgId: string): Promise<Volume[]> {
  const rows = await volumesOf(ctx.db)
    .where('volumes.org_id', '=', orgId)
    .orderBy('volumes.name')
    .execute();
  return rows.map(toVolume);
}

/**
 * Resizes (never below what the volume holds) or changes how often a durable one is copied.
 * Growing counts against the organization's storage limit: under the org row's lock, held
 * until the new size is written, so two resizes cannot both slip under it.
 */
export async function updateVolume(
  ctx: ServiceContext,
  orgId: string,
  id: string,
  body: UpdateVolumeBody,
): Promise<Volume> {
  const before = await findVolume(ctx.db, orgId, id);
  const grows = (v: VolumeRow) => (body.sizeGb ?? 0) - v.size_gb;
  // Refused before any host work; the locked count below decides.
  if (grows(before) > 0) {
    await assertOrgRoom(ctx.db, orgId, { storageGb: grows(before) }, { lock: false });
  }
  await ctx.db.transaction().execute(async (tx) => {
    // The org row first: a resize running meanwhile has written its size before this reads.
    if (body.sizeGb !== undefined) await lockOrg(tx, orgId);
    const current = await findVolume(tx, orgId, id);
    if (body.sizeGb !== undefined && body.sizeGb !== current.size_gb) {
      if (grows(current) > 0) await assertOrgRoom(tx, orgId, { storageGb: grows(current) });
      const { pool } = await ctx.pool.get();
      const info = await pool.info(current.pool_volume);
      if (info?.usedBytes && info.usedBytes > body.sizeGb * GiB) {
        throw new ApiError(
          'conflict',
          `The volume holds ${(info.usedBytes / GiB).toFixed(1)} GB; it cannot shrink to ${body.sizeGb} GB.`,
        );
      }
      await pool.setQuota(current.pool_volume, body.sizeGb * GiB);
    }
    const changes = {
      ...(body.sizeGb !== undefined ? { size_gb: body.sizeGb } : {}),
      ...(body.flushIntervalS !== undefined ? { flush_interval_s: body.flushIntervalS } : {}),
    };
    // An empty body changes nothing (an UPDATE without columns is not valid SQL).
    if (Object.keys(changes).length === 0) return;
    await tx
      .updateTable('volumes')
      .set(changes)
      .where('id', '=', id)
      .where('org_id', '=', orgId)
      .execute();
  });
  return toVolume(await findVolume(ctx.db, orgId, id));
}

/** Deletes a volume that is not attached (409 volume-attached), with its data. */
export async function deleteVolume(ctx: ServiceContext, orgId: string, id: string) {
  const row = await ctx.db.transaction().execute(async (tx) => {
    const v = await findVolume(tx, orgId, id);
    await tx.selectFrom('volumes').select('id').where('id', '=', id).forUpdate().execute();
    if (v.app_id || v.machine_id) {
      const to = v.app_name ? `the app '${v.app_name}'` : `the machine ${v.machine_id}`;
      throw new ApiError(
        'volume-attached',
        `The volume '${v.name}' is attached to ${to}; detach it first.`,
      );
    }
    await tx.deleteFrom('volumes').where('id', '=', id).execute();
    await releaseName(tx, orgId, v.name);
    await enqueue(tx, ctx.jobs, 'volumes.purge', { poolVolume: v.pool_volume, volumeId: v.id });
    return v;
  });
  await purgeVolume(ctx, row.pool_volume, row.id).catch((err: unknown) =>
    ctx.log.warn({ err, id }, 'volume data left to its purge job'),
  );
}

async function removeVolumeRow(ctx: ServiceContext, orgId: string, id: string) {
  await ctx.db.transaction().execute(async (tx) => {
    const v = await tx
      .deleteFrom('volumes')
      .where('id', '=', id)
      .returning('name')
      .executeTakeFirst();
    if (v) await releaseName(tx, orgId, v.name);
  });
}

/** Removes a volume's data and its durable copies. Idempotent (the purge job reruns it). */
export async function purgeVolume(ctx: ServiceContext, poolVolume: string, volumeId: string) {
  const { pool } = await ctx.pool.get();
  await pool.destroy(poolVolume);
  for (const name of await pool.list()) {
    if (name.startsWith(`${copyPrefix(volumeId)}`)) await pool.destroy(name);
  }
}

/** Durable copies of a volume are pool snapshots named `vc-<id>-<gen>`. */
export function copyPrefix(volumeId: string): string {
  return `vc-${volumeId.replace(/^vol-/, '')}-`;
}

/**
 * Queues the durable copy number `gen` of a volume, `flushIntervalS` from now. Keyed by
 * generation, so a copy that queues its successor while it runs is not refused as a
 * duplicate of itself, and a rerun of it cannot queue two.
 */
export async function scheduleFlush(
  ctx: ServiceContext,
  volumeId: string,
  everyS: number,
  gen = 1,
) {
  await enqueue(
    ctx.db,
    ctx.jobs,
    'volumes.flush',
    { volumeId },
    { runAt: new Date(Date.now() + everyS * 1000), dedupeKey: `${volumeId}@${gen}` },
  );
}
