/**
 * Asking for a preview (`POST /v1/apps/:name/previews`, and a pushed branch through
 * `createPreview`): one transaction makes what is only rows (the preview's app, counted
 * against the organization's app limit like any app; the app's own secrets and
 * protection, copied; a read-only key to each of its buckets), the preview's record in
 * state `creating` and its durable job (`previews.create`, work.ts), which makes the
 * database branches and deploys the app's live release. So the request answers at once,
 * and a restart in between loses nothing: the job resumes, or its failure takes back
 * everything the preview made.
 */
import {
  PREVIEW_DEFAULT_TTL_S,
  PREVIEW_MAX_TTL_S,
  PREVIEW_MIN_TTL_S,
  PREVIEW_SEPARATOR,
  type Preview,
} from '../../contracts/previews.js';
import type { MachineConfig } from '../../contracts/machines.js';
import { newId } from '../../crypto/tokens.js';
import { ApiError, badRequest } from '../../errors/api-error.js';
import { enqueue } from '../../jobs/queue.js';
import type { Tx } from '../../store/db.js';
import { insertApp } from '../apps/apps.js';
import { copyProtection } from '../apps/protection.js';
import { findApp, type AppRow } from '../apps/records.js';
import { attachBucketWithin } from '../buckets/attachments.js';
import type { ServiceContext } from '../context.js';
import { liveRelease, releaseConfig } from '../deploys/records.js';
import { noteAppOfZoneOrg } from '../domains/memory.js';
import { assertOrgRoom, type OrgAddition } from '../org-limits.js';
import { copyOwnSecrets } from '../secrets.js';
import { attachedDatabases } from './branches.js';
import { previewOfApp, toPreview } from './records.js';

export interface PreviewRequest {
  /** The preview's name: a DNS label; `<app>--<name>` must fit 63 characters. */
  name: string;
  /** Lifetime from now (default 7 days); or `expiresAt`. Both within 1 hour to 30 days. */
  ttlSeconds?: number | undefined;
  expiresAt?: string | undefined;
  /** The Git branch the preview follows (a push made it): shown, and found by it. */
  gitBranch?: string | undefined;
}

/** `<app>--<preview>`: the preview's own app. */
export function previewAppName(app: string, preview: string): string {
  return `${app}${PREVIEW_SEPARATOR}${preview}`;
}

function expiryOf(ctx: ServiceContext, req: PreviewRequest): Date {
  const now = ctx.clock().getTime();
  if (req.ttlSeconds !== undefined && req.expiresAt !== undefined) {
    throw badRequest([{ path: 'expiresAt', message: 'give ttlSeconds or expiresAt, not both' }]);
  }
  const at =
    req.expiresAt !== undefined
      ? new Date(req.expiresAt).getTime()
      : now + (req.ttlSeconds ?? PREVIEW_DEFAULT_TTL_S) * 1000;
  if (at < now + PREVIEW_MIN_TTL_S * 1000 || at > now + PREVIEW_MAX_TTL_S * 1000) {
    throw badRequest([
      {
        path: req.expiresAt !== undefined ? 'expiresAt' : 'ttlSeconds',
        message: `a preview lives between ${PREVIEW_MIN_TTL_S} s and ${PREVIEW_MAX_TTL_S} s (30 days)`,
      },
    ]);
  }
  return new Date(at);
}

/**
 * What the preview will add beyond its app, refused early (before any row) when the
 * organization has no room: a branch of each attached database, and the machine of the
 * live release. The job's own steps check again, locked, as every create does.
 */
async function assertRoom(ctx: ServiceContext, orgId: string, app: AppRow): Promise<void> {
  const add: Required<Omit<OrgAddition, 'replacing'>> = {
    databases: 0,
    machines: 0,
    memoryMb: 0,
    storageGb: 0,
  };
  for (const d of await attachedDatabases(ctx.db, app.id)) {
    add.databases += 1;
    add.memoryMb += d.memory_mb;
    add.storageGb += d.size_gb;
  }
  const live = await liveRelease(ctx.db, app.id);
  if (live) {
    const config: MachineConfig = releaseConfig(live);
    add.machines += 1;
    add.memoryMb += config.memoryMb ?? 512;
  }
  await assertOrgRoom(ctx.db, orgId, add, { lock: false });
}

/** A failed preview of that name that left nothing behind gives way to a new one. */
async function clearFailed(tx: Tx, appId: string, name: string): Promise<void> {
  const old = await tx
    .selectFrom('previews')
    .select(['id', 'state', 'preview_app_id'])
    .where('app_id', '=', appId)
    .where('name', '=', name)
    .forUpdate()
    .executeTakeFirst();
  if (!old) return;
  const leftovers = await tx
    .selectFrom('preview_databases')
    .select('database_id')
    .where('preview_id', '=', old.id)
    .executeTakeFirst();
  if (old.state === 'failed' && old.preview_app_id === null && !leftovers) {
    await tx.deleteFrom('previews').where('id', '=', old.id).execute();
    return;
  }
  throw new ApiError('already-exists', `The app already has a preview named '${name}'.`);
}

/**
 * Makes the preview `req.name` of app `appName` of `orgId`: answers its record in state
 * `creating` (202 for the route). Refusals: 404 for an app not of the organization, 400
 * for a name or lifetime out of bounds, 409 `already-exists` / `name-taken`, 409
 * `conflict` for a preview of a preview, 403 with the limit's code.
 */
export async function createPreview(
  ctx: ServiceContext,
  orgId: string,
  appName: string,
  req: PreviewRequest,
): Promise<Preview> {
  const app = await findApp(ctx.db, orgId, appName);
  const name = previewAppName(appName, req.name);
  if (name.length > 63) {
    throw badRequest([
      {
        path: 'name',
        message: `'${name}' is longer than an app name may be (63); at most ${63 - appName.length - PREVIEW_SEPARATOR.length} characters here`,
      },
    ]);
  }
  if (await previewOfApp(ctx.db, app.id)) {
    throw new ApiError('conflict', `'${appName}' is a preview; make previews of its app instead.`);
  }
  const expiresAt = expiryOf(ctx, req);
  await assertRoom(ctx, orgId, app);
  const record = await ctx.db.transaction().execute(async (tx) => {
    const parent = await findApp(tx, orgId, appName, { lock: true });
    await clearFailed(tx, parent.id, req.name);
    const own = await insertApp(tx, ctx, orgId, name);
    await copyOwnSecrets(tx, ctx, parent.id, own.id);
    await copyProtection(tx, ctx, parent, own);
    const buckets = await tx
      .selectFrom('bucket_attachments as a')
      .innerJoin('buckets as b', 'b.id', 'a.bucket_id')
      .select(['b.id', 'b.org_id', 'b.name', 'b.backend_ref', 'b.created_at', 'a.prefix'])
      .where('a.app_id', '=', parent.id)
      .execute();
    for (const { prefix, ...bucket } of buckets) {
      await attachBucketWithin(tx, ctx, own, bucket, prefix || undefined, { readOnly: true });
    }
    const release = await liveRelease(tx, parent.id);
    const row = await tx
      .insertInto('previews')
      .values({
        id: newId('pvw'),
        org_id: orgId,
        app_id: parent.id,
        name: req.name,
        preview_app_id: own.id,
        app_name: name,
        state: 'creating',
        state_reason: 'queued',
        release_id: release?.id ?? null,
        release_version: release?.version ?? null,
        deploy_id: null,
        git_branch: req.gitBranch ?? null,
        expires_at: expiresAt,
        created_at: ctx.clock(),
      })
      .returningAll()
      .executeTakeFirstOrThrow();
    await enqueue(tx, ctx.jobs, 'previews.create', { previewId: row.id });
    return toPreview(tx, ctx, appName, row);
  });
  noteAppOfZoneOrg(ctx, orgId, name, true);
  return record;
}
