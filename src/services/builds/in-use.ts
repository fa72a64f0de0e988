/**
 * Which of an app's build images must stay in the image store when its builds are
 * pruned: those something still runs or may run again. A pruned build whose image is in
 * use keeps its row too, so `build:<id>` goes on resolving for what runs it.
 */
import { sql } from 'kysely';
import type { ServiceContext } from '../context.js';

/** The image digests of `appId`'s builds that are in use (see the list below). */
export async function digestsInUse(ctx: ServiceContext, appId: string): Promise<Set<string>> {
  // Machines (of any app of the organization: `build:<id>` works wherever an image does)
  // that are not deleted and run one of the app's builds.
  const machines = await ctx.db
    .selectFrom('machines')
    .innerJoin('builds', (j) =>
      j.on(sql`machines.config->>'image'`, '=', sql`'build:' || builds.id`),
    )
    .select('builds.image_digest')
    .where('builds.app_id', '=', appId)
    .where('machines.observed_state', '<>', 'deleted')
    .where('builds.image_digest', 'is not', null)
    .execute();
  // The app's newest releases (PIER_RELEASES_KEPT, the live one among them): a rollback
  // to one finds its image. (prune.ts keeps their builds' rows too.)
  const releases = await ctx.db
    .selectFrom('releases')
    .select('image_digest')
    .where('app_id', '=', appId)
    .orderBy('version', 'desc')
    .limit(ctx.config.releasesKept)
    .execute();
  return new Set([
    ...machines.map((m) => m.image_digest!),
    ...releases.flatMap((r) => (r.image_digest ? [r.image_digest] : [])),
  ]);
}
