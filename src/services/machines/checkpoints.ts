/**
 * Machine checkpoints (spec 4.9; docs/api.md "Machine checkpoints"): named snapshots of a
 * machine's disk (its writable layer), taken with the storage pool's copy-on-write, and
 * restored in place. Labels live here, in `machine_checkpoints`; on the host a checkpoint
 * is known by its machine's id and its number (`seq`), so no label reaches a volume name.
 *
 * A row is inserted `creating` (which reserves the label) before its snapshot is taken,
 * and becomes `ready` after; a `creating` row left by a crash is swept with its volume.
 * With `checkpointIntervalS` a running machine gets automatic checkpoints (`auto`), of
 * which the newest three are kept. `memory: true` would need CRIU: it answers 501 with
 * the reason this host cannot.
 */
import { sql } from 'kysely';
import type { Selectable } from 'kysely';
import type { Checkpoint, CreateCheckpointBody, RestoreAnswer } from '../../contracts/machines.js';
import { newId } from '../../crypto/tokens.js';
import { ApiError } from '../../errors/api-error.js';
import { MachineStartError } from '../../runtime/runtime.js';
import { PoolError } from '../../storage/pool/pool.js';
import type { MachineCheckpointsTable } from '../../store/schema.js';
import type { ServiceContext } from '../context.js';
import { runtimeOf, setState } from './lifecycle.js';
import { specOf } from './machines.js';
import { meterRunning } from './metering.js';
import { everyInterval } from '../ticker.js';
import { configOf, findMachine, machinesQuery, toMachine, type MachineRow } from './records.js';
import { TRANSITIONAL, type MachineState } from './states.js';
import { machineTransition } from './state-events.js';

type CheckpointRow = Selectable<MachineCheckpointsTable>;

/** Automatic checkpoints kept per machine; older ones are deleted. */
export const AUTO_KEEP = 3;

const MIB = 1024 * 1024;

export function toCheckpoint(r: CheckpointRow): Checkpoint {
  return {
    label: r.label,
    machineId: r.machine_id,
    createdAt: r.created_at.toISOString(),
    auto: r.auto,
    memory: r.memory,
    ...(r.size_bytes !== null ? { sizeMb: Math.ceil(r.size_bytes / MIB) } : {}),
  };
}

/** Checkpoints made in this process and not yet ready (never swept as crash leftovers). */
const inFlightOf = (ctx: ServiceContext): Set<string> => ctx.memory.checkpointsInFlight;

/** The machine, unless it was destroyed (then 404 as for a missing one). */
async function liveMachine(ctx: ServiceContext, orgId: string, id: string): Promise<MachineRow> {
  const row = await findMachine(ctx.db, orgId, id);
  if (row.observed_state === 'deleted')
    throw new ApiError('not-found', `Machine '${id}' not found.`);
  return row;
}

async function readyCheckpoint(
  ctx: ServiceContext,
  machineId: string,
  label: string,
): Promise<CheckpointRow> {
  const ck = await ctx.db
    .selectFrom('machine_checkpoints')
    .selectAll()
    .where('machine_id', '=', machineId)
    .where('label', '=', label)
    .where('state', '=', 'ready')
    .executeTakeFirst();
  if (!ck) {
    throw new ApiError(
      'checkpoint-not-found',
      `Machine ${machineId} has no checkpoint '${label}'.`,
    );
  }
  return ck;
}

function busy(row: MachineRow): ApiError {
  return new ApiError(
    'machine-busy',
    `Machine ${row.id}: the machine is ${row.observed_state}; wait until it is done.`,
  );
}

/** A failure of the host's runtime as an answer. */
function hostError(err: unknown, machineId: string, doing: string): ApiError {
  if (err instanceof ApiError) return err;
  if (err instanceof PoolError && err.code === 'no-space')
    return new ApiError('no-capacity', `No room on the host to ${doing}: ${err.message}`);
  if (err instanceof PoolError && err.code === 'not-found') {
    return new ApiError(
      'conflict',
      `Machine ${machineId} has no disk to ${doing} (its create did not get that far).`,
    );
  }
  return new ApiError('host-refused', `Could not ${doing}: ${(err as Error).message}`);
}

const PREFIX = { manual: 'v', auto: 'auto-', 'before-restore': 'before-restore-' } as const;

/**
 * Takes a checkpoint of the machine now: the row (label reserved, next number), then the
 * snapshot on the host, then the row is ready and the machine's `checkpointAt` set.
 */
async function takeCheckpoint(
  ctx: ServiceContext,
  row: MachineRow,
  opts: { kind: keyof typeof PREFIX; label?: string },
): Promise<CheckpointRow> {
  const runtime = runtimeOf(ctx);
  const id = newId('mck');
  const flying = inFlightOf(ctx);
  flying.add(id);
  try {
    const made = await ctx.db.transaction().execute(async (tx) => {
      // A default label someone took by hand is skipped: the next number is tried.
      for (let i = 0; i < 20; i++) {
        const { checkpoint_seq: seq } = await tx
          .updateTable('machines')
          .set((eb) => ({ checkpoint_seq: eb('checkpoint_seq', '+', 1) }))
          .where('id', '=', row.id)
          .returning('checkpoint_seq')
          .executeTakeFirstOrThrow();
        const label = opts.label ?? `${PREFIX[opts.kind]}${seq}`;
        const inserted = await tx
          .insertInto('machine_checkpoints')
          .values({
            id,
            machine_id: row.id,
            org_id: row.org_id,
            label,
            seq,
            auto: opts.kind === 'auto',
            memory: false,
          })
          .onConflict((oc) => oc.columns(['machine_id', 'label']).doNothing())
          .returningAll()
          .executeTakeFirst();
        if (inserted) return inserted;
        if (opts.label !== undefined) {
          throw new ApiError(
            'already-exists',
            `Machine ${row.id} already has a checkpoint '${label}'.`,
          );
        }
      }
      throw new ApiError('conflict', `No free default label for a checkpoint of ${row.id}.`);
    });
    const key = String(made.seq);
    let sizeBytes: number | null;
    try {
      sizeBytes = (await runtime.checkpoint(row.id, key)).sizeBytes;
    } catch (err) {
      await runtime.deleteCheckpoint(row.id, key).catch(() => undefined);
      await ctx.db.deleteFrom('machine_checkpoints').where('id', '=', id).execute();
      throw hostError(err, row.id, 'take a checkpoint');
    }
    const ready = await ctx.db
      .updateTable('machine_checkpoints')
      .set({ state: 'ready', size_bytes: sizeBytes })
      .where('id', '=', id)
      .returningAll()
      .executeTakeFirst();
    if (!ready) {
      // The machine was destroyed meanwhile (its checkpoints with it).
      await runtime.deleteCheckpoint(row.id, key).catch(() => undefined);
      throw new ApiError('not-found', `Machine '${row.id}' not found.`);
    }
    await ctx.db
      .updateTable('machines')
      .set({ checkpoint_at: ready.created_at })
      .where('id', '=', row.id)
      .execute();
    return ready;
  } finally {
    flying.delete(id);
  }
}

/** Removes a checkpoint: its disk on the host, then its row. */
async function removeCheckpoint(ctx: ServiceContext, ck: CheckpointRow): Promise<void> {
  await runtimeOf(ctx).deleteCheckpoint(ck.machine_id, String(ck.seq));
  await ctx.db.deleteFrom('machine_checkpoints').where('id', '=', ck.id).execute();
}

export async function createCheckpoint(
  ctx: ServiceContext,
  orgId: string,
  id: string,
  body: CreateCheckpointBody,
): Promise<Checkpoint> {
  const row = await liveMachine(ctx, orgId, id);
  if (body?.memory) {
    const memory = await runtimeOf(ctx).memoryCheckpoints();
    throw new ApiError(
      'not-implemented',
      memory.supported
        ? 'Checkpoints with memory are not available on this installation yet; omit memory for a disk checkpoint.'
        : `Checkpoints with memory are not available on this installation: ${memory.reason}. ` +
            'Omit memory for a disk checkpoint.',
    );
  }
  if (TRANSITIONAL.has(row.observed_state as MachineState)) throw busy(row);
  const made = await takeCheckpoint(ctx, row, {
    kind: 'manual',
    ...(body?.label !== undefined ? { label: body.label } : {}),
  });
  return toCheckpoint(made);
}

export async function listCheckpoints(
  ctx: ServiceContext,
  orgId: string,
  id: string,
  opts: { auto: boolean },
): Promise<Checkpoint[]> {
  const row = await liveMachine(ctx, orgId, id);
  let q = ctx.db
    .selectFrom('machine_checkpoints')
    .selectAll()
    .where('machine_id', '=', row.id)
    .where('state', '=', 'ready');
  if (!opts.auto) q = q.where('auto', '=', false);
  const rows = await q.orderBy('created_at').orderBy('seq').execute();
  return rows.map(toCheckpoint);
}

export async function deleteCheckpoint(
  ctx: ServiceContext,
  orgId: string,
  id: string,
  label: string,
): Promise<void> {
  const row = await liveMachine(ctx, orgId, id);
  const ck = await readyCheckpoint(ctx, row.id, label);
  await removeCheckpoint(ctx, ck).catch((err: unknown) => {
    throw hostError(err, row.id, 'delete the checkpoint');
  });
}

/**
 * Restores the machine's disk from a checkpoint: with `keepCurrent` (default) the disk as
 * it is first becomes the checkpoint `before-restore-<n>`. A running (or suspended)
 * machine is stopped for it and started again on the restored disk; a stopped or failed
 * one stays stopped. The machine is claimed (`stopping`) for the whole time, so any other
 * action meanwhile is 409 `machine-busy`. A failure before the disk is swapped leaves the
 * machine on its own disk, brought back as it was.
 */
export async function restoreCheckpoint(
  ctx: ServiceContext,
  orgId: string,
  id: string,
  label: string,
  opts: { keepCurrent: boolean },
): Promise<RestoreAnswer> {
  const row = await liveMachine(ctx, orgId, id);
  const ck = await readyCheckpoint(ctx, row.id, label);
  const runtime = runtimeOf(ctx);
  const state = row.observed_state as MachineState;
  if (TRANSITIONAL.has(state)) throw busy(row);
  const wasUp = state === 'running' || state === 'suspended';
  // Its running time is booked while it is still `running`.
  if (state === 'running') await meterRunning(ctx.db, row.id);
  const claimed = await ctx.db
    .updateTable('machines')
    .set({ observed_state: 'stopping', updated_at: new Date() })
    .where('id', '=', row.id)
    .where('observed_state', '=', state)
    .executeTakeFirst();
  if (claimed.numUpdatedRows === 0n) {
    throw new ApiError('machine-busy', `Machine ${row.id}: another operation just began.`);
  }
  machineTransition(ctx, row.id);
  const spec = await specOf(ctx, row);
  const fail = async (err: unknown): Promise<never> => {
    const code = err instanceof MachineStartError ? err.code : 'host-refused';
    await setState(ctx, row.id, 'failed', {
      create_error: (err as Error).message,
      create_error_code: code,
      ...(err instanceof MachineStartError && err.bootLog ? { create_boot_log: err.bootLog } : {}),
    });
    throw new ApiError(code, (err as Error).message);
  };
  /** Starts it again (or leaves it stopped) once its disk is settled. */
  const bringBack = async () => {
    if (!wasUp) {
      await setState(ctx, row.id, 'stopped', { desired_state: 'stopped' });
      return;
    }
    await setState(ctx, row.id, 'starting', { desired_state: 'running' });
    const { bootMs } = await runtime.start(spec).catch(fail);
    await setState(ctx, row.id, 'running', {
      boot_ms: bootMs,
      ready_at: new Date(),
      metered_at: new Date(),
    });
  };

  if (wasUp) await runtime.stop(spec).catch(fail);
  let savedAs: string | undefined;
  try {
    if (opts.keepCurrent)
      savedAs = (await takeCheckpoint(ctx, row, { kind: 'before-restore' })).label;
    await runtime.restoreCheckpoint(row.id, String(ck.seq));
  } catch (err) {
    // The disk was not swapped: the machine comes back on its own (a failed start is
    // recorded on it), and the answer says why the restore did not happen.
    await bringBack().catch(() => undefined);
    throw hostError(err, row.id, 'restore the checkpoint');
  }
  await bringBack();
  ctx.log.info({ machine: row.id, checkpoint: ck.label, savedAs }, 'machine checkpoint restored');
  return {
    ...toMachine(await findMachine(ctx.db, orgId, row.id)),
    restoredFrom: ck.label,
    ...(savedAs !== undefined ? { savedAs } : {}),
  };
}

/**
 * Automatic checkpoints: every running machine with `checkpointIntervalS` gets one when
 * its newest automatic checkpoint (or its start) is that old; the newest AUTO_KEEP are
 * kept. Also sweeps checkpoints a crash left half-made.
 */
export async function checkpointTick(ctx: ServiceContext, now = Date.now()): Promise<void> {
  if (!ctx.machines) return;
  await sweepLeftovers(ctx, now);
  const rows = (
    await machinesQuery(ctx.db)
      .where('machines.host', '=', 'local')
      .where('machines.observed_state', '=', 'running')
      .execute()
  ).filter((r) => configOf(r).checkpointIntervalS !== undefined);
  if (rows.length === 0) return;
  const last = await ctx.db
    .selectFrom('machine_checkpoints')
    .select(['machine_id', sql<Date>`max(created_at)`.as('at')])
    .where(
      'machine_id',
      'in',
      rows.map((r) => r.id),
    )
    .where('auto', '=', true)
    .groupBy('machine_id')
    .execute();
  const lastAt = new Map(last.map((l) => [l.machine_id, new Date(l.at).getTime()]));
  for (const row of rows) {
    const everyMs = configOf(row).checkpointIntervalS! * 1000;
    const since = Math.max(lastAt.get(row.id) ?? 0, (row.ready_at ?? row.created_at).getTime());
    if (now - since < everyMs) continue;
    try {
      await takeCheckpoint(ctx, row, { kind: 'auto' });
      await pruneAuto(ctx, row.id);
    } catch (err) {
      ctx.log.warn({ err, machine: row.id }, 'automatic checkpoint failed');
    }
  }
}

/** Deletes the automatic checkpoints of a machine beyond the newest AUTO_KEEP. */
async function pruneAuto(ctx: ServiceContext, machineId: string): Promise<void> {
  const old = await ctx.db
    .selectFrom('machine_checkpoints')
    .selectAll()
    .where('machine_id', '=', machineId)
    .where('auto', '=', true)
    .where('state', '=', 'ready')
    .orderBy('created_at', 'desc')
    .orderBy('seq', 'desc')
    .offset(AUTO_KEEP)
    .limit(1000)
    .execute();
  for (const ck of old) await removeCheckpoint(ctx, ck);
}

/** Rows still `creating` that no call in this process is making: a crash left them. */
async function sweepLeftovers(ctx: ServiceContext, now: number): Promise<void> {
  const flying = inFlightOf(ctx);
  const stale = await ctx.db
    .selectFrom('machine_checkpoints')
    .selectAll()
    .where('state', '=', 'creating')
    .where('created_at', '<', new Date(now - 60_000))
    .execute();
  for (const ck of stale) {
    if (flying.has(ck.id)) continue;
    await removeCheckpoint(ctx, ck).catch((err: unknown) =>
      ctx.log.warn({ err, checkpoint: ck.id }, 'half-made checkpoint could not be removed'),
    );
  }
}

/** Runs the automatic checkpoints every `everyMs`; returns a stopper. */
export function scheduleCheckpoints(ctx: ServiceContext, everyMs = 1000): () => void {
  return everyInterval(ctx.log, 'checkpoint tick', everyMs, () => checkpointTick(ctx));
}
