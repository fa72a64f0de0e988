/**
 * Preview rows and the answers made from them (src/contracts/previews.ts). Every lookup
 * takes the caller's organization and the app it previews, so another organization's
 * preview (or app) is simply not found. This file imports no other preview file.
 */
import type { Preview } from '../../contracts/previews.js';
import { notFound } from '../../errors/api-error.js';
import type { Executor } from '../../store/db.js';
import type { PreviewsTable } from '../../store/schema.js';
import { defaultAddressOf } from '../apps/records.js';
import type { ServiceContext } from '../context.js';
import type { Selectable } from 'kysely';

export type PreviewRow = Selectable<PreviewsTable>;

export async function previewById(ex: Executor, id: string): Promise<PreviewRow | undefined> {
  return ex.selectFrom('previews').selectAll().where('id', '=', id).executeTakeFirst();
}

/** The preview `name` of app `appId`, or 404 `not-found`. */
export async function findPreview(
  ex: Executor,
  appId: string,
  name: string,
  opts: { lock?: boolean } = {},
): Promise<PreviewRow> {
  let q = ex
    .selectFrom('previews')
    .selectAll()
    .where('app_id', '=', appId)
    .where('name', '=', name);
  if (opts.lock) q = q.forUpdate();
  const row = await q.executeTakeFirst();
  if (!row) throw notFound(`Preview '${name}'`);
  return row;
}

/** The previews of app `appId` (the app they preview), by name. */
export async function previewsOf(ex: Executor, appId: string): Promise<PreviewRow[]> {
  return ex
    .selectFrom('previews')
    .selectAll()
    .where('app_id', '=', appId)
    .orderBy('name')
    .execute();
}

/** The preview whose own app is `appId`, if that app is a preview's. */
export async function previewOfApp(ex: Executor, appId: string): Promise<PreviewRow | undefined> {
  return ex
    .selectFrom('previews')
    .selectAll()
    .where('preview_app_id', '=', appId)
    .executeTakeFirst();
}

/** The branches a preview made that still exist: source and branch, by source name. */
export async function branchesOf(ex: Executor, previewId: string) {
  return ex
    .selectFrom('preview_databases as p')
    .innerJoin('databases as d', 'd.id', 'p.database_id')
    .select([
      'p.source_id',
      'p.source_name',
      'p.database_id',
      'd.name',
      'd.state',
      'd.state_reason',
    ])
    .where('p.preview_id', '=', previewId)
    .orderBy('p.source_name')
    .execute();
}

export async function toPreview(
  ex: Executor,
  ctx: ServiceContext,
  appName: string,
  r: PreviewRow,
): Promise<Preview> {
  const branches = await branchesOf(ex, r.id);
  const buckets = r.preview_app_id
    ? await ex
        .selectFrom('bucket_attachments as a')
        .innerJoin('buckets as b', 'b.id', 'a.bucket_id')
        .select('b.name')
        .where('a.app_id', '=', r.preview_app_id)
        .orderBy('b.name')
        .execute()
    : [];
  return {
    id: r.id,
    name: r.name,
    app: appName,
    appName: r.app_name,
    state: r.state,
    ...(r.state_reason ? { stateReason: r.state_reason } : {}),
    defaultAddress: defaultAddressOf(ctx, r.app_name),
    ...(r.release_version !== null ? { release: r.release_version } : {}),
    ...(r.deploy_id ? { deploy: r.deploy_id } : {}),
    databases: branches.map((b) => ({ source: b.source_name, branch: b.name })),
    buckets: buckets.map((b) => b.name),
    ...(r.git_branch ? { gitBranch: r.git_branch } : {}),
    expiresAt: r.expires_at.toISOString(),
    createdAt: r.created_at.toISOString(),
  };
}
