/**
 * Rollback (CONTRACT 7, spec 7.4): deploys a recorded release again, exactly (its image
 * digest, config and secret values). Without a version the target is the release that
 * was live before the current one. Each refusal has its code, checked in this order:
 * the name is a database (`rollback-not-for-resources`), a deploy runs
 * (`deploy-in-flight`), no such release, no earlier one, the target is live, it never
 * was, it has the current release's image (`rollback-same-build`), its config no longer
 * passes today's rules (`rollback-needs-machine-config`), its image is gone.
 */
import type { Deploy } from '../../contracts/deploys.js';
import { machineConfigSchema } from '../../contracts/machines.js';
import { ApiError } from '../../errors/api-error.js';
import { formatReference, parseReference } from '../../runtime/images/reference.js';
import type { Executor } from '../../store/db.js';
import { findApp, type AppRow } from '../apps/records.js';
import type { ServiceContext } from '../context.js';
import { assertNoDeployInFlight, insertDeploy } from './deploys.js';
import {
  findDeploy,
  liveRelease,
  releaseConfig,
  releasesQuery,
  toDeploy,
  type ReleaseRow,
} from './records.js';

export async function rollback(
  ctx: ServiceContext,
  orgId: string,
  appName: string,
  body: { version?: number | undefined },
): Promise<Deploy> {
  const app = await appOrResource(ctx.db, orgId, appName);
  await assertNoDeployInFlight(ctx.db, app.id);
  const current = await liveRelease(ctx.db, app.id);
  const target = await targetOf(ctx.db, app.id, current, body.version);
  if (target.status === 'live') {
    throw new ApiError('rollback-target-current', `Release v${target.version} is the live one.`);
  }
  if (!target.live_at) {
    throw new ApiError(
      'rollback-target-never-live',
      `Release v${target.version} never went live (its deploy failed).`,
    );
  }
  if (current && target.image_digest === current.image_digest) {
    throw new ApiError(
      'rollback-same-build',
      `Release v${target.version} runs the same image as the live v${current.version} (${current.image_digest}).`,
    );
  }
  const config = releaseConfig(target);
  if (!machineConfigSchema.safeParse(config).success) {
    throw new ApiError(
      'rollback-needs-machine-config',
      `The machine settings of v${target.version} no longer pass today's rules; deploy its image with a config.`,
    );
  }
  await assertArtifact(ctx, target);
  const id = await ctx.db.transaction().execute(async (tx) => {
    await findApp(tx, orgId, appName, { lock: true });
    return insertDeploy(tx, ctx, orgId, app.id, {
      image: target.image,
      config,
      strategy: 'rolling',
      rollbackOf: { id: target.id, version: target.version },
    });
  });
  return toDeploy(await findDeploy(ctx.db, orgId, id));
}

/** The app, or 409 for the name of a database (restore it instead), or 404. */
async function appOrResource(ex: Executor, orgId: string, name: string): Promise<AppRow> {
  try {
    return await findApp(ex, orgId, name);
  } catch (err) {
    const database = await ex
      .selectFrom('databases')
      .select('id')
      .where('org_id', '=', orgId)
      .where('name', '=', name)
      .executeTakeFirst();
    if (database) {
      throw new ApiError(
        'rollback-not-for-resources',
        `'${name}' is a database; restore it to a moment instead.`,
      );
    }
    throw err;
  }
}

async function targetOf(
  ex: Executor,
  appId: string,
  current: ReleaseRow | undefined,
  version: number | undefined,
): Promise<ReleaseRow> {
  const listed = releasesQuery(ex)
    .where('releases.app_id', '=', appId)
    .where('releases.status', '<>', 'deploying');
  if (version !== undefined) {
    const row = await listed.where('releases.version', '=', version).executeTakeFirst();
    if (!row) throw new ApiError('release-not-found', `The app has no release v${version}.`);
    return row;
  }
  const previous = current
    ? await listed
        .where('releases.version', '<', current.version)
        .where('releases.live_at', 'is not', null)
        .orderBy('releases.version', 'desc')
        .executeTakeFirst()
    : undefined;
  if (!previous) {
    throw new ApiError(
      'no-previous-release',
      current
        ? `No release was live before v${current.version}.`
        : 'The app has no live release to roll back from.',
    );
  }
  return previous;
}

/** 409 `release-artifact-gone` unless the release's image can still be run. */
async function assertArtifact(ctx: ServiceContext, target: ReleaseRow): Promise<void> {
  const gone = () =>
    new ApiError(
      'release-artifact-gone',
      `The image of v${target.version} (${target.image_digest}) is no longer available.`,
    );
  if (!target.image_digest) throw gone();
  if (target.build_id) {
    const build = await ctx.db
      .selectFrom('builds')
      .select('image_digest')
      .where('id', '=', target.build_id)
      .executeTakeFirst();
    if (!build?.image_digest) throw gone();
  }
  // Kept in the store: the release runs from it without a registry.
  if (ctx.images && (await ctx.images.get(target.image_digest))) return;
  // Not kept: a pulled image may still come back from its registry by digest; a build's never.
  if (target.build_id || !ctx.images) throw gone();
  try {
    const ref = parseReference(releaseConfig(target).image);
    const pinned = formatReference({ ...ref, tag: undefined, digest: target.image_digest });
    await ctx.images.pull(pinned, { signal: AbortSignal.timeout(30_000) });
  } catch {
    throw gone();
  }
}
