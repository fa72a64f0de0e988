/**
 * What a preview made goes, and only that: its app (with its machines, secrets, read-only
 * bucket keys, domains and builds: the apps family's teardown) and its database branches.
 * The app it previews, that app's databases and buckets are never touched. Three ways
 * lead here: `DELETE …/previews/:preview`, its expiry (and a pushed branch's delete), and
 * a creation that failed (the record stays, `failed` with the reason, until deleted or
 * expired). Every step finds gone what is gone, so each can simply run again.
 */
import { sql } from 'kysely';
import { ApiError } from '../../errors/api-error.js';
import { deleteApp } from '../apps/teardown.js';
import { findApp } from '../apps/records.js';
import type { ServiceContext } from '../context.js';
import { everyInterval } from '../ticker.js';
import { removePreviewBranches } from './branches.js';
import { findPreview, previewById, type PreviewRow } from './records.js';

function unlessGone(err: unknown): void {
  if (!(err instanceof ApiError && err.code === 'not-found')) throw err;
}

/** Removes the preview's app and branches, leaving its row. */
async function takeBack(ctx: ServiceContext, p: PreviewRow): Promise<void> {
  if (p.preview_app_id) await deleteApp(ctx, p.org_id, p.app_name).catch(unlessGone);
  await removePreviewBranches(ctx, p.org_id, p.id);
}

/** Removes everything the preview made, then its row. */
export async function removePreview(ctx: ServiceContext, p: PreviewRow): Promise<void> {
  await takeBack(ctx, p);
  await ctx.db.deleteFrom('previews').where('id', '=', p.id).execute();
}

/** `DELETE /v1/apps/:name/previews/:preview`: 404 for an app or preview not of the org. */
export async function deletePreview(
  ctx: ServiceContext,
  orgId: string,
  appName: string,
  name: string,
): Promise<void> {
  const app = await findApp(ctx.db, orgId, appName);
  await removePreview(ctx, await findPreview(ctx.db, app.id, name));
}

/** The preview ends `failed` with `reason`, and what it made is taken back. */
export async function failPreview(
  ctx: ServiceContext,
  previewId: string,
  reason: string,
): Promise<void> {
  const failed = await ctx.db
    .updateTable('previews')
    .set({ state: 'failed', state_reason: reason.slice(0, 1000) })
    .where('id', '=', previewId)
    .where('state', '=', 'creating')
    .returningAll()
    .executeTakeFirst();
  if (!failed) return;
  ctx.log.warn({ previewId, reason }, 'preview failed');
  // A take-back that fails here (a machine busy) is finished by the upkeep (settle below).
  await takeBack(ctx, failed).catch((err: unknown) =>
    ctx.log.warn({ err, previewId }, 'preview take-back left to the upkeep'),
  );
}

/** Removes every preview whose `expiresAt` has passed; answers how many were due. */
export async function expirePreviews(ctx: ServiceContext): Promise<number> {
  const due = await ctx.db
    .selectFrom('previews')
    .selectAll()
    .where('expires_at', '<=', ctx.clock())
    .execute();
  for (const p of due) {
    await removePreview(ctx, p)
      .then(() => ctx.log.info({ preview: p.app_name }, 'expired preview deleted'))
      .catch((err: unknown) => ctx.log.warn({ err, preview: p.app_name }, 'expired preview kept'));
  }
  return due.length;
}

/**
 * Previews left half-made: `creating` with no job that could still finish them (the
 * worker died on its last try) fail; `failed` ones whose take-back did not finish are
 * taken back again.
 */
export async function settlePreviews(ctx: ServiceContext): Promise<number> {
  const stuck = await sql<{ id: string }>`SELECT p.id FROM previews p
    WHERE p.state = 'creating' AND NOT EXISTS (SELECT 1 FROM jobs j
      WHERE j.kind = 'previews.create' AND j.state IN ('queued', 'running')
        AND j.payload->>'previewId' = p.id)`.execute(ctx.db);
  for (const { id } of stuck.rows) {
    await failPreview(ctx, id, 'Its work stopped and could not be resumed.');
  }
  const leftovers = await sql<{ id: string }>`SELECT p.id FROM previews p
    WHERE p.state = 'failed' AND (p.preview_app_id IS NOT NULL
      OR EXISTS (SELECT 1 FROM preview_databases d WHERE d.preview_id = p.id))`.execute(ctx.db);
  for (const { id } of leftovers.rows) {
    const p = await previewById(ctx.db, id);
    if (p) await takeBack(ctx, p);
  }
  return stuck.rows.length + leftovers.rows.length;
}

/**
 * Removes the previews of app `appName` that follow Git branch `gitBranch` (the branch
 * was deleted); answers their names. For the Git push code.
 */
export async function removePreviewsOfBranch(
  ctx: ServiceContext,
  orgId: string,
  appName: string,
  gitBranch: string,
): Promise<string[]> {
  const app = await findApp(ctx.db, orgId, appName);
  const rows = await ctx.db
    .selectFrom('previews')
    .selectAll()
    .where('app_id', '=', app.id)
    .where('git_branch', '=', gitBranch)
    .execute();
  for (const p of rows) await removePreview(ctx, p);
  return rows.map((p) => p.name);
}

/** Runs expiry and the settling of half-made previews every `everyMs`; returns a stopper. */
export function schedulePreviewUpkeep(ctx: ServiceContext, everyMs = 5000): () => void {
  return everyInterval(ctx.log, 'preview upkeep', everyMs, async () => {
    await expirePreviews(ctx);
    await settlePreviews(ctx);
  });
}
