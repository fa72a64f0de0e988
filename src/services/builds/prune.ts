/**
 * Keeps an app's builds and sources bounded: the newest KEPT_BUILDS finished builds stay
 * (with their logs); older finished ones go, and with them every source that no kept or
 * unfinished build uses and that is older than SOURCE_GRACE_MS (a fresh upload waits for
 * its build). The builds of the app's newest PIER_RELEASES_KEPT releases are never pruned.
 * Their images stay in the image store: a release may still run one.
 */
import { rm } from 'node:fs/promises';
import type { ServiceContext } from '../context.js';
import { buildLogFile, sourceFile } from './records.js';

export const KEPT_BUILDS = 20;
const SOURCE_GRACE_MS = 24 * 3600_000;

export async function pruneBuilds(ctx: ServiceContext, appId: string): Promise<void> {
  // The builds of the app's newest releases stay (with their images), for rollbacks.
  const released = (
    await ctx.db
      .selectFrom('releases')
      .select('build_id')
      .where('app_id', '=', appId)
      .orderBy('version', 'desc')
      .limit(ctx.config.releasesKept)
      .execute()
  ).flatMap((r) => (r.build_id ? [r.build_id] : []));
  const finished = await ctx.db
    .selectFrom('builds')
    .select('id')
    .where('app_id', '=', appId)
    .where('state', 'in', ['done', 'failed'])
    .$if(released.length > 0, (q) => q.where('id', 'not in', released))
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc')
    .offset(KEPT_BUILDS)
    .limit(1000)
    .execute();
  const old = finished.map((b) => b.id);
  if (old.length > 0) {
    await ctx.db.deleteFrom('builds').where('id', 'in', old).execute();
    for (const id of old) await rm(buildLogFile(ctx, id), { force: true });
  }
  const unused = await ctx.db
    .selectFrom('build_sources')
    .select('id')
    .where('app_id', '=', appId)
    .where('created_at', '<', new Date(Date.now() - SOURCE_GRACE_MS))
    .where(({ not, exists, selectFrom }) =>
      not(
        exists(
          selectFrom('builds')
            .select('builds.id')
            .whereRef('builds.source_id', '=', 'build_sources.id'),
        ),
      ),
    )
    .execute();
  for (const s of unused) {
    await ctx.db.deleteFrom('build_sources').where('id', '=', s.id).execute();
    await rm(sourceFile(ctx, s.id), { force: true });
  }
}
