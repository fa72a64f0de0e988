/**
 * Keeps an app's builds and sources bounded: the newest KEPT_BUILDS finished builds stay
 * (with their logs); older finished ones go, and with them every source that no kept or
 * unfinished build uses and that is older than SOURCE_GRACE_MS (a fresh upload waits for
 * its build). A pruned build's image leaves pier's image store too, unless it is in use
 * (in-use.ts): then the build stays, so `build:<id>` still resolves.
 * The builds of the app's newest PIER_RELEASES_KEPT releases are never pruned.
 */
import { rm } from 'node:fs/promises';
import type { ServiceContext } from '../context.js';
import { digestsInUse } from './in-use.js';
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
    .select(['id', 'image_digest'])
    .where('app_id', '=', appId)
    .where('state', 'in', ['done', 'failed'])
    .$if(released.length > 0, (q) => q.where('id', 'not in', released))
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc')
    .offset(KEPT_BUILDS)
    .limit(1000)
    .execute();
  const inUse = await digestsInUse(ctx, appId);
  const old = finished.filter((b) => !b.image_digest || !inUse.has(b.image_digest));
  if (old.length > 0) {
    await ctx.db
      .deleteFrom('builds')
      .where(
        'id',
        'in',
        old.map((b) => b.id),
      )
      .execute();
    for (const b of old) await rm(buildLogFile(ctx, b.id), { force: true });
    await removeBuildImages(
      ctx,
      old.map((b) => b.image_digest),
    );
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

/**
 * Removes from the image store the images of builds whose rows are gone, unless a build
 * still recorded (of any app: two builds can make one image) has the same digest.
 */
export async function removeBuildImages(
  ctx: ServiceContext,
  digests: (string | null)[],
): Promise<void> {
  const wanted = [...new Set(digests.filter((d): d is string => !!d))];
  if (wanted.length === 0 || !ctx.builder) return;
  const kept = await ctx.db
    .selectFrom('builds')
    .select('image_digest')
    .where('image_digest', 'in', wanted)
    .execute();
  const keep = new Set(kept.map((k) => k.image_digest));
  for (const d of wanted) if (!keep.has(d)) await ctx.builder.removeImage(d);
}
