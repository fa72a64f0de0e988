/**
 * Rows of deploys and releases and the answers made from them (src/contracts/deploys.ts).
 * Every lookup takes the caller's organization, so another organization's deploy or
 * release is simply not found.
 */
import type { Deploy, Release, ReleaseStatus } from '../../contracts/deploys.js';
import type { MachineConfig } from '../../contracts/machines.js';
import { ApiError } from '../../errors/api-error.js';
import type { Executor } from '../../store/db.js';

export function deploysQuery(ex: Executor) {
  return ex
    .selectFrom('deploys')
    .innerJoin('apps', 'apps.id', 'deploys.app_id')
    .leftJoin('releases', 'releases.id', 'deploys.release_id')
    .select([
      'deploys.id',
      'deploys.org_id',
      'deploys.app_id',
      'apps.name as app_name',
      'deploys.status',
      'deploys.image',
      'deploys.config',
      'deploys.strategy',
      'deploys.release_id',
      'releases.version as release_version',
      'deploys.rollback_of',
      'deploys.rollback_release_id',
      'deploys.machine_count',
      'deploys.step',
      'deploys.error',
      'deploys.created_at',
      'deploys.finished_at',
    ]);
}

export type DeployRow = Awaited<
  ReturnType<ReturnType<typeof deploysQuery>['executeTakeFirstOrThrow']>
>;

export function toDeploy(r: DeployRow): Deploy {
  return {
    id: r.id,
    app: r.app_name,
    status: r.status,
    image: r.image,
    strategy: r.strategy,
    ...(r.release_version !== null ? { release: r.release_version } : {}),
    ...(r.rollback_of !== null ? { rollbackOf: r.rollback_of } : {}),
    ...(r.step ? { step: r.step } : {}),
    createdAt: r.created_at.toISOString(),
    ...(r.finished_at ? { finishedAt: r.finished_at.toISOString() } : {}),
    ...(r.error ? { error: r.error } : {}),
  };
}

/** The deploy `id` of the organization, or 404 `not-found`. */
export async function findDeploy(ex: Executor, orgId: string, id: string): Promise<DeployRow> {
  const row = await deploysQuery(ex)
    .where('deploys.id', '=', id)
    .where('deploys.org_id', '=', orgId)
    .executeTakeFirst();
  if (!row) throw new ApiError('not-found', `No deploy '${id}' in the organization.`);
  return row;
}

export function releasesQuery(ex: Executor) {
  return ex
    .selectFrom('releases')
    .innerJoin('apps', 'apps.id', 'releases.app_id')
    .select([
      'releases.id',
      'releases.org_id',
      'releases.app_id',
      'apps.name as app_name',
      'releases.version',
      'releases.image',
      'releases.image_digest',
      'releases.build_id',
      'releases.config',
      'releases.secret_names',
      'releases.secrets_nonce',
      'releases.secrets_sealed',
      'releases.status',
      'releases.created_at',
      'releases.live_at',
    ]);
}

export type ReleaseRow = Awaited<
  ReturnType<ReturnType<typeof releasesQuery>['executeTakeFirstOrThrow']>
>;

/** The config a release runs its machines with (its image included). */
export function releaseConfig(r: Pick<ReleaseRow, 'config'>): MachineConfig {
  return r.config as unknown as MachineConfig;
}

export function toRelease(r: ReleaseRow, deployId: string): Release {
  return {
    version: r.version,
    app: r.app_name,
    image: r.image,
    imageDigest: r.image_digest ?? '',
    ...(r.build_id ? { build: r.build_id } : {}),
    config: releaseConfig(r),
    // `deploying` is never listed; a release read while its deploy runs is not live yet.
    status: r.status as ReleaseStatus,
    deploy: deployId,
    secrets: r.secret_names,
    createdAt: r.created_at.toISOString(),
    ...(r.live_at ? { liveAt: r.live_at.toISOString() } : {}),
  };
}

/** The app's live release, if it has one. */
export async function liveRelease(ex: Executor, appId: string): Promise<ReleaseRow | undefined> {
  return releasesQuery(ex)
    .where('releases.app_id', '=', appId)
    .where('releases.status', '=', 'live')
    .executeTakeFirst();
}
