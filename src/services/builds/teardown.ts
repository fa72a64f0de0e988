/**
 * What an app's builds leave on the host when the app is deleted: its sources and build
 * logs (files named by id), the repository its pushes landed in, the images of its
 * builds in pier's image store, and its layer cache (the `b-<app>` volume, with whatever
 * build is still running on it). The rows go with the app's by cascade; the bytes go
 * once that has committed.
 */
import { rm } from 'node:fs/promises';
import type { Tx } from '../../store/db.js';
import type { ServiceContext } from '../context.js';
import { removeAppRepo } from '../git/repos.js';
import { removeBuildImages } from './prune.js';
import { buildLogFile, sourceFile } from './records.js';

/**
 * Reads, inside the app's deleting transaction, what its builds hold; answers the
 * removal to run once that transaction has committed.
 */
export async function appBuildsRemoval(
  tx: Tx,
  ctx: ServiceContext,
  appId: string,
): Promise<() => Promise<void>> {
  const builds = await tx
    .selectFrom('builds')
    .select(['id', 'image_digest'])
    .where('app_id', '=', appId)
    .execute();
  const sources = await tx
    .selectFrom('build_sources')
    .select('id')
    .where('app_id', '=', appId)
    .execute();
  return async () => {
    // Its builds stop first (a running one would write on), then their bytes go.
    await ctx.builder?.removeCache(appId);
    for (const b of builds) await rm(buildLogFile(ctx, b.id), { force: true });
    for (const s of sources) await rm(sourceFile(ctx, s.id), { force: true });
    await removeAppRepo(ctx, appId);
    await removeBuildImages(
      ctx,
      builds.map((b) => b.image_digest),
    );
  };
}
