/**
 * Releases of an app (CONTRACT 7), newest first. A release under way (`deploying`) is not
 * listed: it shows once its deploy made it live or failed.
 */
import type { Release } from '../../contracts/deploys.js';
import { findApp } from '../apps/records.js';
import type { ServiceContext } from '../context.js';
import { releasesQuery, toRelease } from './records.js';

export async function listReleases(
  ctx: ServiceContext,
  orgId: string,
  appName: string,
): Promise<Release[]> {
  const app = await findApp(ctx.db, orgId, appName);
  const rows = await releasesQuery(ctx.db)
    .innerJoin('deploys', 'deploys.release_id', 'releases.id')
    .select('deploys.id as deploy_id')
    .where('releases.app_id', '=', app.id)
    .where('releases.status', '<>', 'deploying')
    .orderBy('releases.version', 'desc')
    .limit(100)
    .execute();
  return rows.map((r) => toRelease(r, r.deploy_id));
}
