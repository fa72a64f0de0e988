/**
 * The first step of a deploy: the release it goes to. The image is pinned to a digest
 * (a build's, or the one a pull of the reference found), the app's own secrets are
 * sealed into it, and its version (1, 2, … per app) is taken; a rollback copies its
 * target's image, config and secrets exactly. The release row, the deploy's link to it
 * and its machine count commit together, so a rerun after a crash finds the release made.
 */
import type { MachineConfig } from '../../contracts/machines.js';
import { newId } from '../../crypto/tokens.js';
import { formatReference, parseReference } from '../../runtime/images/reference.js';
import { findApp } from '../apps/records.js';
import { findBuild } from '../builds/records.js';
import type { ServiceContext } from '../context.js';
import { DeployFailure } from './failure.js';
import { type DeployRow, releaseConfig, releasesQuery } from './records.js';
import { revealSecrets } from '../secrets.js';
import { openReleaseSecrets, sealReleaseSecrets } from './release-secrets.js';

interface Pinned {
  image: string;
  digest: string;
  buildId: string | null;
  config: MachineConfig;
  secrets: Record<string, string>;
}

export async function prepareRelease(
  ctx: ServiceContext,
  deploy: DeployRow,
  signal: AbortSignal,
): Promise<string> {
  if (deploy.release_id) return deploy.release_id;
  const pinned = deploy.rollback_release_id
    ? await fromRelease(ctx, deploy.org_id, deploy.rollback_release_id)
    : await fromImage(ctx, deploy, signal);
  const id = newId('rel');
  await ctx.db.transaction().execute(async (tx) => {
    // The app's row orders versions: one release is numbered at a time.
    await findApp(tx, deploy.org_id, deploy.app_name, { lock: true });
    const last = await tx
      .selectFrom('releases')
      .select((eb) => eb.fn.max('version').as('v'))
      .where('app_id', '=', deploy.app_id)
      .executeTakeFirst();
    const sealed = sealReleaseSecrets(ctx, id, pinned.secrets);
    await tx
      .insertInto('releases')
      .values({
        id,
        org_id: deploy.org_id,
        app_id: deploy.app_id,
        version: (last?.v ?? 0) + 1,
        image: deploy.image,
        image_digest: pinned.digest,
        build_id: pinned.buildId,
        config: JSON.stringify(pinned.config),
        secret_names: sealed.names,
        secrets_nonce: sealed.nonce,
        secrets_sealed: sealed.sealed,
        status: 'deploying',
        created_at: ctx.clock(),
      })
      .execute();
    const replaced = await tx
      .selectFrom('machines')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .where('app_id', '=', deploy.app_id)
      .where('observed_state', 'not in', ['deleted', 'failed'])
      .executeTakeFirstOrThrow();
    await tx
      .updateTable('deploys')
      .set({ release_id: id, machine_count: Math.max(1, Number(replaced.n)) })
      .where('id', '=', deploy.id)
      .execute();
  });
  return id;
}

/** A rollback: the target release's image, config and secrets, as recorded. */
async function fromRelease(ctx: ServiceContext, orgId: string, releaseId: string) {
  const target = await releasesQuery(ctx.db)
    .where('releases.id', '=', releaseId)
    .where('releases.org_id', '=', orgId)
    .executeTakeFirst();
  if (!target?.image_digest) throw new DeployFailure('The release to roll back to is gone.');
  return {
    image: target.image,
    digest: target.image_digest,
    buildId: target.build_id,
    config: releaseConfig(target),
    secrets: openReleaseSecrets(ctx, target),
  } satisfies Pinned;
}

/** A new deploy: the build's digest, or the pulled image's, and today's secrets. */
async function fromImage(
  ctx: ServiceContext,
  deploy: DeployRow,
  signal: AbortSignal,
): Promise<Pinned> {
  const config = deploy.config as unknown as MachineConfig;
  const secrets = await revealSecrets(ctx.db, ctx, deploy.app_id, { only: 'own' });
  if (deploy.image.startsWith('build:')) {
    const build = await findBuild(ctx.db, deploy.org_id, deploy.image.slice(6)).catch(() => {
      throw new DeployFailure(`The build ${deploy.image.slice(6)} is gone.`);
    });
    if (!build.image_digest) throw new DeployFailure(`The build ${build.id} has no image.`);
    return { image: deploy.image, digest: build.image_digest, buildId: build.id, config, secrets };
  }
  if (!ctx.images) throw new DeployFailure('This installation cannot pull images.');
  // The config's image: the deploy's reference, or a digest already pinned (a roll for
  // new secret values runs the live release's image exactly).
  const pulled = await ctx.images.pull(config.image, { signal }).catch((err: unknown) => {
    if (signal.aborted) throw err;
    throw new DeployFailure(`The image ${deploy.image} could not be pulled: ${String(err)}`);
  });
  // Every machine of the release, and a rollback to it, runs exactly this digest.
  const ref = parseReference(pulled.ref);
  const pinnedImage = formatReference({
    registry: ref.registry,
    repository: ref.repository,
    digest: pulled.digest,
  });
  return {
    image: deploy.image,
    digest: pulled.digest,
    buildId: null,
    config: { ...config, image: pinnedImage },
    secrets,
  };
}
