/**
 * Branch, fork and restore requests (spec 4.3): each answers 202 at once with the copy
 * (or the database) in state `restoring`; the rows and the job that does the work commit
 * in one transaction, so a restart in between resumes the work instead of losing it.
 */
import { newId, randomBase62 } from '../../crypto/tokens.js';
import { ApiError, badRequest } from '../../errors/api-error.js';
import { enqueue } from '../../jobs/queue.js';
import type { Tx } from '../../store/db.js';
import { claimName } from '../names.js';
import { assertOrgRoom, type OrgAddition } from '../org-limits.js';
import { pickArchive } from './archives.js';
import { assertNameFree, reserveFront, volumeFor } from './create.js';
import {
  findDatabase,
  insertArchive,
  insertInstance,
  instancesOf,
  toRecord,
  type DatabaseRow,
  type InstanceRow,
} from './records.js';
import type {
  BranchBody,
  DatabaseRecord,
  ForkBody,
  RestoreBody,
} from '../../contracts/databases.js';
import type { DatabaseContext } from './work.js';

/** What the copy job needs, fixed at request time. */
export interface CopyPayload {
  databaseId: string;
  sourceId: string;
  copyKind: 'branch' | 'fork';
  /** Fork: the archive read, and the moment (absent: the moment the job runs). */
  archiveId?: string;
  asOf?: string;
  target: { id: string; volume: string; kind: 'postgres' | 'redis' };
}

function expiryOf(ctx: DatabaseContext, b: { expiresAt?: string; ttlSeconds?: number }) {
  const now = ctx.clock();
  if (b.ttlSeconds !== undefined) return new Date(now.getTime() + b.ttlSeconds * 1000);
  if (b.expiresAt === undefined) return null;
  const at = new Date(b.expiresAt);
  if (at <= now) throw badRequest([{ path: 'expiresAt', message: 'must be in the future' }]);
  return at;
}

/** A source must be ready to be copied. */
function assertCopyable(source: DatabaseRow): void {
  if (source.state !== 'ready') {
    throw new ApiError(
      'not-ready',
      `The database '${source.name}' is ${source.state}; it can be copied once it is ready.`,
    );
  }
}

interface NewCopy {
  source: DatabaseRow;
  name: string;
  copyKind: 'branch' | 'fork';
  ephemeral: boolean;
  expiresAt: Date | null;
  sourceAsOf: Date | null;
  archived: boolean;
}

/** Inserts the copy's rows (name, database, instance, archive) inside `tx`. */
async function insertCopy(
  ctx: DatabaseContext,
  tx: Tx,
  c: NewCopy,
  ids: { id: string; instanceId: string; port: number; internalPort: number },
): Promise<{ row: DatabaseRow; instance: InstanceRow }> {
  const { source } = c;
  await claimName(tx, source.org_id, c.name, 'database');
  const sealed = ctx.box.seal(randomBase62(32), `database:${ids.id}`);
  const archiveId = c.archived ? newId('arc') : null;
  const volume = volumeFor(source.kind, ids.instanceId);
  const row = await tx
    .insertInto('databases')
    .values({
      id: ids.id,
      org_id: source.org_id,
      name: c.name,
      kind: source.kind,
      host: ctx.databases.hostId,
      port: ids.port,
      memory_mb: source.memory_mb,
      size_gb: source.size_gb,
      persistent: source.persistent,
      flush_interval_s: source.flush_interval_s,
      durability: 'standard',
      locale: source.locale,
      suspend_policy: source.suspend_policy ? JSON.stringify(source.suspend_policy) : null,
      state: 'restoring',
      copy_kind: c.copyKind,
      source_name: source.name,
      source_as_of: c.sourceAsOf,
      ephemeral: c.ephemeral,
      expires_at: c.expiresAt,
      password_nonce: sealed.nonce,
      password_ciphertext: sealed.ciphertext,
      archive_id: archiveId,
      created_at: ctx.clock(),
    })
    .returningAll()
    .executeTakeFirstOrThrow();
  if (archiveId) {
    await insertArchive(tx, {
      id: archiveId,
      orgId: source.org_id,
      databaseId: ids.id,
      kind: source.kind,
      sourceVolume: volume,
    });
  }
  const instance = await insertInstance(tx, {
    id: ids.instanceId,
    databaseId: ids.id,
    role: 'primary',
    volume,
    internalPort: ids.internalPort,
  });
  return { row, instance };
}

/**
 * Reserves the host side of a new copy of `source`, then runs `inTx`; undoes the front on
 * failure. The copy counts against the organization's limits (org-limits.ts) as a
 * database of the source's memory and size: a copy is never host-redundant.
 */
async function withNewCopy<T>(
  ctx: DatabaseContext,
  orgId: string,
  name: string,
  source: DatabaseRow,
  inTx: (
    tx: Tx,
    ids: { id: string; instanceId: string; port: number; internalPort: number },
  ) => Promise<T>,
): Promise<T> {
  await assertNameFree(ctx, orgId, name);
  const adds: OrgAddition = { databases: 1, memoryMb: source.memory_mb, storageGb: source.size_gb };
  // Refused before any host work; the locked count in the transaction decides.
  await assertOrgRoom(ctx.db, orgId, adds, { lock: false });
  const id = newId('db');
  const port = await reserveFront(ctx, id, source.kind);
  try {
    const ids = {
      id,
      instanceId: newId('dbi'),
      port,
      internalPort: await ctx.databases.internalPort(),
    };
    return await ctx.db.transaction().execute(async (tx) => {
      await assertOrgRoom(tx, orgId, adds);
      return inTx(tx, ids);
    });
  } catch (err) {
    await ctx.databases.forget(id);
    throw err;
  }
}

export async function branchDatabase(
  ctx: DatabaseContext,
  orgId: string,
  sourceName: string,
  body: BranchBody,
  /**
   * Runs in the transaction that makes the branch's rows, so that what the caller records
   * about the branch commits with it or not at all (a preview attaching its branch).
   */
  within?: (tx: Tx, branch: DatabaseRow) => Promise<void>,
): Promise<DatabaseRecord> {
  const source = await findDatabase(ctx.db, orgId, sourceName);
  assertCopyable(source);
  const expiresAt = expiryOf(ctx, body);
  const ephemeral = body.ephemeral === true;
  return withNewCopy(ctx, orgId, body.name, source, async (tx, ids) => {
    const locked = await findDatabase(tx, orgId, sourceName, { lock: true });
    assertCopyable(locked);
    const { row, instance } = await insertCopy(
      ctx,
      tx,
      {
        source: locked,
        name: body.name,
        copyKind: 'branch',
        ephemeral,
        expiresAt,
        sourceAsOf: ctx.clock(),
        archived: !ephemeral && locked.persistent,
      },
      ids,
    );
    const payload: CopyPayload = {
      databaseId: row.id,
      sourceId: locked.id,
      copyKind: 'branch',
      target: { id: instance.id, volume: instance.volume, kind: row.kind },
    };
    await enqueue(tx, ctx.jobs, 'databases.copy', payload);
    if (within) await within(tx, row);
    return toRecord(row, [instance]);
  });
}

export async function forkDatabase(
  ctx: DatabaseContext,
  orgId: string,
  sourceName: string,
  body: ForkBody,
): Promise<DatabaseRecord> {
  const source = await findDatabase(ctx.db, orgId, sourceName);
  assertCopyable(source);
  const expiresAt = expiryOf(ctx, body);
  const asOf = body.asOf ? new Date(body.asOf) : undefined;
  const archive = await pickArchive(ctx, source, asOf);
  return withNewCopy(ctx, orgId, body.name, source, async (tx, ids) => {
    const locked = await findDatabase(tx, orgId, sourceName, { lock: true });
    assertCopyable(locked);
    const { row, instance } = await insertCopy(
      ctx,
      tx,
      {
        source: locked,
        name: body.name,
        copyKind: 'fork',
        ephemeral: false,
        expiresAt,
        sourceAsOf: asOf ?? null,
        archived: locked.persistent,
      },
      ids,
    );
    const payload: CopyPayload = {
      databaseId: row.id,
      sourceId: locked.id,
      copyKind: 'fork',
      archiveId: archive.id,
      ...(asOf ? { asOf: asOf.toISOString() } : {}),
      target: { id: instance.id, volume: instance.volume, kind: row.kind },
    };
    await enqueue(tx, ctx.jobs, 'databases.copy', payload);
    return toRecord(row, [instance]);
  });
}

/** What the restore job needs, fixed at request time. */
export interface RestorePayload {
  databaseId: string;
  archiveId: string;
  asOf: string;
  preserved: CopyPayload;
  /** The instance the restored data goes into; it replaces the primary at the swap. */
  next: { id: string; volume: string; internalPort: number; archiveId: string | null };
}

/** The default name of the preserved state: `<name>-pre-restore-<unix seconds>`, fitted to 63. */
export function preservedName(name: string, at: Date): string {
  const suffix = `-pre-restore-${Math.floor(at.getTime() / 1000)}`;
  return `${name.slice(0, 63 - suffix.length).replace(/-+$/, '')}${suffix}`;
}

export async function restoreDatabase(
  ctx: DatabaseContext,
  orgId: string,
  name: string,
  body: RestoreBody,
): Promise<DatabaseRecord & { preservedUnderName: string }> {
  const current = await findDatabase(ctx.db, orgId, name);
  assertCopyable(current);
  const asOf = new Date(body.asOf);
  const archive = await pickArchive(ctx, current, asOf);
  const keepAs = body.preserveUnderName ?? preservedName(name, ctx.clock());
  return withNewCopy(ctx, orgId, keepAs, current, async (tx, ids) => {
    const locked = await findDatabase(tx, orgId, name, { lock: true });
    assertCopyable(locked);
    const { row: kept, instance } = await insertCopy(
      ctx,
      tx,
      {
        source: locked,
        name: keepAs,
        copyKind: 'branch',
        ephemeral: false,
        expiresAt: null,
        sourceAsOf: ctx.clock(),
        archived: locked.persistent,
      },
      ids,
    );
    const updated = await tx
      .updateTable('databases')
      .set({ state: 'restoring', state_reason: null })
      .where('id', '=', locked.id)
      .returningAll()
      .executeTakeFirstOrThrow();
    const nextId = newId('dbi');
    const payload: RestorePayload = {
      databaseId: locked.id,
      archiveId: archive.id,
      asOf: asOf.toISOString(),
      preserved: {
        databaseId: kept.id,
        sourceId: locked.id,
        copyKind: 'branch',
        target: { id: instance.id, volume: instance.volume, kind: kept.kind },
      },
      next: {
        id: nextId,
        volume: volumeFor(locked.kind, nextId),
        internalPort: await ctx.databases.internalPort(),
        archiveId: locked.archive_id ? newId('arc') : null,
      },
    };
    await enqueue(tx, ctx.jobs, 'databases.restore', payload);
    return {
      ...toRecord(updated, await instancesOf(tx, locked.id)),
      preservedUnderName: keepAs,
    };
  });
}
