/**
 * Deploys of an app (CONTRACT 7): the row and its `deploys.run` job commit together (the
 * job, jobs.ts, rolls the machines), one deploy per app at a time. A deploy names an image
 * (an OCI reference or `build:<id>`) and optionally a machine config; without one it keeps
 * the live release's, else the newest machine's, else what the build detected.
 */
import type { CreateDeployBody, Deploy, DeployConfigInput } from '../../contracts/deploys.js';
import type { MachineConfig } from '../../contracts/machines.js';
import { newId } from '../../crypto/tokens.js';
import { ApiError, badRequest } from '../../errors/api-error.js';
import { enqueue } from '../../jobs/queue.js';
import { parseReference } from '../../runtime/images/reference.js';
import type { Executor } from '../../store/db.js';
import { findApp, type AppRow } from '../apps/records.js';
import { findBuild } from '../builds/records.js';
import type { ServiceContext } from '../context.js';
import { withDefaults } from '../machines/config-schema.js';
import { configOf, machinesQuery } from '../machines/records.js';
import { deploysQuery, findDeploy, liveRelease, releaseConfig, toDeploy } from './records.js';

/** What a deploy is asked to do beyond its body: a rollback names its release. */
export interface DeployOrigin {
  /** The release a rollback deploys again (its image, config and secrets, exactly). */
  rollbackOf?: { id: string; version: number };
}

export async function createDeploy(
  ctx: ServiceContext,
  orgId: string,
  appName: string,
  body: CreateDeployBody,
  origin: DeployOrigin = {},
): Promise<Deploy> {
  const app = await findApp(ctx.db, orgId, appName);
  const config = await resolveConfig(ctx.db, orgId, app, body);
  const id = await ctx.db.transaction().execute(async (tx) => {
    await findApp(tx, orgId, appName, { lock: true });
    return insertDeploy(tx, ctx, orgId, app.id, {
      image: body.image,
      config,
      strategy: body.strategy ?? 'rolling',
      ...origin,
    });
  });
  return toDeploy(await findDeploy(ctx.db, orgId, id));
}

/**
 * Writes a pending deploy and its job in the caller's transaction (which holds the app's
 * row). 409 `deploy-in-flight` while another deploy of the app is pending or running:
 * the partial unique index decides between concurrent requests.
 */
export async function insertDeploy(
  tx: Executor,
  ctx: ServiceContext,
  orgId: string,
  appId: string,
  d: {
    image: string;
    config: MachineConfig;
    strategy: 'rolling' | 'immediate';
    rollbackOf?: { id: string; version: number };
  },
): Promise<string> {
  await assertNoDeployInFlight(tx, appId);
  const id = newId('dpl');
  try {
    await tx
      .insertInto('deploys')
      .values({
        id,
        org_id: orgId,
        app_id: appId,
        status: 'pending',
        image: d.image,
        config: JSON.stringify(d.config),
        strategy: d.strategy,
        release_id: null,
        rollback_of: d.rollbackOf?.version ?? null,
        rollback_release_id: d.rollbackOf?.id ?? null,
        step: 'queued',
        error: null,
        created_at: ctx.clock(),
      })
      .execute();
  } catch (err) {
    if ((err as { constraint?: string }).constraint === 'deploys_one_in_flight') throw inFlight();
    throw err;
  }
  await enqueue(tx, ctx.jobs, 'deploys.run', { deployId: id });
  return id;
}

export async function assertNoDeployInFlight(ex: Executor, appId: string): Promise<void> {
  const running = await ex
    .selectFrom('deploys')
    .select('id')
    .where('app_id', '=', appId)
    .where('status', 'in', ['pending', 'running'])
    .executeTakeFirst();
  if (running) throw inFlight(running.id);
}

function inFlight(id?: string): ApiError {
  return new ApiError(
    'deploy-in-flight',
    `Another deploy of the app is running${id ? ` (${id})` : ''}; wait for it to end.`,
    id ? { deploy: id } : {},
  );
}

/**
 * The machine config a deploy runs (its image included). Explicit config wins; without
 * one: the live release's, else the newest machine's, else defaults with what the build
 * detected (start command, internal port). A config without `suspendPolicy` keeps the
 * app's rule (spec 2.12).
 */
async function resolveConfig(
  ex: Executor,
  orgId: string,
  app: AppRow,
  body: CreateDeployBody,
): Promise<MachineConfig> {
  const build = await checkImage(ex, orgId, body.image);
  const previous = await previousConfig(ex, app.id);
  const appPolicy = previous?.suspendPolicy;
  if (body.config) return withDefaults({ ...body.config, image: body.image }, appPolicy);
  if (previous) return { ...previous, image: body.image };
  const detected: Partial<DeployConfigInput> = {
    ...(build?.internal_port ? { internalPort: build.internal_port } : {}),
  };
  return withDefaults({ ...detected, image: body.image }, appPolicy);
}

/** The app's config today: the live release's, else its newest machine's. */
async function previousConfig(ex: Executor, appId: string): Promise<MachineConfig | undefined> {
  const live = await liveRelease(ex, appId);
  if (live) return releaseConfig(live);
  const newest = await machinesQuery(ex)
    .where('machines.app_id', '=', appId)
    .where('machines.observed_state', '<>', 'deleted')
    .orderBy('machines.created_at', 'desc')
    .executeTakeFirst();
  return newest ? configOf(newest) : undefined;
}

/**
 * A `build:<id>` of the organization that has an image (404 `build-not-found`, 409
 * `build-not-ready`), or a well-formed OCI reference (400 naming `image`).
 */
async function checkImage(ex: Executor, orgId: string, image: string) {
  if (image.startsWith('build:')) {
    const build = await findBuild(ex, orgId, image.slice(6));
    if (build.state !== 'done' || !build.image_digest) {
      throw new ApiError(
        'build-not-ready',
        `The build '${build.id}' is ${build.state}${build.error ? `: ${build.error}` : ''}; it has no image.`,
      );
    }
    return build;
  }
  try {
    parseReference(image);
  } catch (err) {
    throw badRequest([{ path: 'image', message: (err as Error).message }]);
  }
  return undefined;
}

export async function listDeploys(ctx: ServiceContext, orgId: string, appName: string) {
  const app = await findApp(ctx.db, orgId, appName);
  const rows = await deploysQuery(ctx.db)
    .where('deploys.app_id', '=', app.id)
    .orderBy('deploys.created_at', 'desc')
    .orderBy('deploys.id', 'desc')
    .limit(100)
    .execute();
  return rows.map(toDeploy);
}

export async function getDeploy(ctx: ServiceContext, orgId: string, id: string) {
  return toDeploy(await findDeploy(ctx.db, orgId, id));
}
