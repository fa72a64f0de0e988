/**
 * A preview's database branches: one ephemeral, copy-on-write branch of each database
 * attached to the app it previews, attached to the preview's app in place of the
 * original. Each is made by the databases family's own branch (`branchDatabase`), whose
 * transaction also records it for the preview and attaches it, so a branch is never left
 * made and unrecorded. Removing them is the databases family's delete.
 */
import { createHash } from 'node:crypto';
import { ApiError } from '../../errors/api-error.js';
import type { Executor } from '../../store/db.js';
import { findApp } from '../apps/records.js';
import type { ServiceContext } from '../context.js';
import { attachDatabaseWithin } from '../databases/attachments.js';
import { branchDatabase } from '../databases/copies.js';
import { removeDatabaseNow } from '../databases/remove.js';
import { branchesOf, type PreviewRow } from './records.js';

const MAX_NAME = 63;

/**
 * The branch's name: `<preview app>--<database>`, or, when that is longer than a name may
 * be, the preview app's name cut short and 8 hex digits of the database's name.
 */
export function branchName(previewApp: string, source: string): string {
  const whole = `${previewApp}--${source}`;
  if (whole.length <= MAX_NAME) return whole;
  const tag = createHash('sha256').update(source).digest('hex').slice(0, 8);
  return `${previewApp.slice(0, MAX_NAME - 2 - tag.length).replace(/-+$/, '')}--${tag}`;
}

/** The databases attached to the app `appId`, as the sources of a preview's branches. */
export async function attachedDatabases(ex: Executor, appId: string) {
  return ex
    .selectFrom('database_attachments as a')
    .innerJoin('databases as d', 'd.id', 'a.database_id')
    .select(['d.id', 'd.name', 'd.state', 'd.kind', 'd.memory_mb', 'd.size_gb'])
    .where('a.app_id', '=', appId)
    .orderBy('d.name')
    .execute();
}

/**
 * Branches `source` for the preview: the branch's rows, its record for the preview and
 * its attachment to the preview's app commit together. The preview's row and app are
 * locked first, so a preview deleted meanwhile gets no branch (the transaction fails).
 */
export async function makeBranch(
  ctx: ServiceContext,
  preview: PreviewRow,
  source: { id: string; name: string },
): Promise<void> {
  await branchDatabase(
    ctx,
    preview.org_id,
    source.name,
    { name: branchName(preview.app_name, source.name), ephemeral: true },
    async (tx, branch) => {
      const app = await findApp(tx, preview.org_id, preview.app_name, { lock: true });
      const still = await tx
        .selectFrom('previews')
        .select('state')
        .where('id', '=', preview.id)
        .forUpdate()
        .executeTakeFirst();
      if (still?.state !== 'creating') {
        throw new ApiError('conflict', 'The preview was deleted while it was being made.');
      }
      await tx
        .insertInto('preview_databases')
        .values({
          preview_id: preview.id,
          source_id: source.id,
          source_name: source.name,
          database_id: branch.id,
        })
        .execute();
      await attachDatabaseWithin(tx, ctx, app, branch);
    },
  );
}

/**
 * Deletes every branch the preview `previewId` made that still exists (each with its
 * attachment and server). One deleted meanwhile is what was wanted.
 */
export async function removePreviewBranches(
  ctx: ServiceContext,
  orgId: string,
  previewId: string,
): Promise<void> {
  for (const b of await branchesOf(ctx.db, previewId)) {
    await removeDatabaseNow(ctx, orgId, b.name).catch((err: unknown) => {
      if (!(err instanceof ApiError && err.code === 'not-found')) throw err;
    });
  }
}
