/**
 * The work of the `previews.create` job: make a preview's database branches, wait for
 * them, deploy the app's release to the preview's app, wait for it, and mark the preview
 * `ready`. Each run does what it can now and, while a branch or the deploy is under way,
 * queues the next run 200 ms later instead of holding a worker slot waiting (branches
 * and deploys are jobs of their own, which need those slots). What is made is recorded
 * in the store as it is made, so a run after a restart carries on from there. A preview
 * that cannot be made ends `failed` with the reason, and everything it made is taken
 * back (remove.ts).
 */
import { ApiError } from '../../errors/api-error.js';
import type { JobContext } from '../../jobs/catalogue.js';
import { enqueue } from '../../jobs/queue.js';
import { findApp } from '../apps/records.js';
import type { ServiceContext } from '../context.js';
import { insertDeploy } from '../deploys/deploys.js';
import { releaseConfig, releasesQuery } from '../deploys/records.js';
import { attachedDatabases, makeBranch } from './branches.js';
import { branchesOf, previewById, type PreviewRow } from './records.js';
import { failPreview } from './remove.js';

/** A preview not ready this long after it was asked for fails. */
export const PREVIEW_CREATE_DEADLINE_MS = 15 * 60_000;
/**
 * How long a run waits before looking again at a branch or deploy under way: short, as a
 * preview's first answer waits on each look (a look is a few reads and one queued job).
 */
const AGAIN_MS = 200;
export const PREVIEW_CREATE_ATTEMPTS = 5;

/** A failure no retry can mend: the preview fails at once. */
class PermanentPreviewError extends Error {}

type Outcome = 'done' | 'again';

async function note(ctx: ServiceContext, id: string, reason: string): Promise<void> {
  await ctx.db
    .updateTable('previews')
    .set({ state_reason: reason })
    .where('id', '=', id)
    .where('state', '=', 'creating')
    .execute();
}

/** Step 1: a branch of every database attached to the app, each made once. */
async function branchDatabases(ctx: ServiceContext, p: PreviewRow): Promise<Outcome> {
  const made = new Set((await branchesOf(ctx.db, p.id)).map((b) => b.source_id));
  let waiting = false;
  for (const source of await attachedDatabases(ctx.db, p.app_id)) {
    if (made.has(source.id)) continue;
    if (source.state === 'restoring') {
      waiting = true;
      continue;
    }
    if (source.state !== 'ready') {
      throw new PermanentPreviewError(`The database '${source.name}' is ${source.state}.`);
    }
    await note(ctx, p.id, `branching ${source.name}`);
    try {
      await makeBranch(ctx, p, source);
    } catch (err) {
      // A limit, a name taken, the source changed: refusals a retry would meet again.
      if (err instanceof ApiError) {
        throw new PermanentPreviewError(`The branch of '${source.name}': ${err.message}`);
      }
      throw err;
    }
  }
  if (waiting) return 'again';
  for (const b of await branchesOf(ctx.db, p.id)) {
    if (b.state === 'restoring') return 'again';
    if (b.state !== 'ready') {
      throw new PermanentPreviewError(
        `The branch '${b.name}' of '${b.source_name}' is ${b.state}${b.state_reason ? `: ${b.state_reason}` : ''}.`,
      );
    }
  }
  return 'done';
}

/** Step 2: the app's release (when it had one live) deployed to the preview's app. */
async function deployRelease(ctx: ServiceContext, p: PreviewRow): Promise<Outcome> {
  if (!p.release_id) return 'done';
  let deployId = p.deploy_id;
  if (!deployId) {
    const release = await releasesQuery(ctx.db)
      .where('releases.id', '=', p.release_id)
      .executeTakeFirst();
    if (!release) throw new PermanentPreviewError('The release to run is gone.');
    await note(ctx, p.id, `deploying v${release.version}`);
    deployId = await ctx.db.transaction().execute(async (tx) => {
      const app = await findApp(tx, p.org_id, p.app_name, { lock: true });
      const row = await tx
        .selectFrom('previews')
        .select(['state', 'deploy_id'])
        .where('id', '=', p.id)
        .forUpdate()
        .executeTakeFirst();
      if (row?.state !== 'creating') throw new PermanentPreviewError('The preview is gone.');
      if (row.deploy_id) return row.deploy_id;
      // The release's image and config exactly; the secrets are the preview's own (copied).
      const id = await insertDeploy(tx, ctx, p.org_id, app.id, {
        image: release.image,
        config: releaseConfig(release),
        strategy: 'immediate',
      });
      await tx.updateTable('previews').set({ deploy_id: id }).where('id', '=', p.id).execute();
      return id;
    });
  }
  const deploy = await ctx.db
    .selectFrom('deploys')
    .select(['status', 'error'])
    .where('id', '=', deployId)
    .executeTakeFirst();
  if (!deploy) throw new PermanentPreviewError('The preview’s deploy is gone.');
  if (deploy.status === 'error') {
    throw new PermanentPreviewError(`The deploy failed: ${deploy.error ?? 'no reason given'}`);
  }
  return deploy.status === 'done' ? 'done' : 'again';
}

/** One run: as far as the preview can go now. */
async function advance(ctx: ServiceContext, p: PreviewRow): Promise<Outcome> {
  if (ctx.clock().getTime() - p.created_at.getTime() > PREVIEW_CREATE_DEADLINE_MS) {
    throw new PermanentPreviewError(
      `It was not ready within ${PREVIEW_CREATE_DEADLINE_MS / 60_000} minutes.`,
    );
  }
  if (!p.preview_app_id) throw new PermanentPreviewError('Its app was deleted.');
  if ((await branchDatabases(ctx, p)) === 'again') return 'again';
  if ((await deployRelease(ctx, p)) === 'again') return 'again';
  await ctx.db
    .updateTable('previews')
    .set({ state: 'ready', state_reason: null })
    .where('id', '=', p.id)
    .where('state', '=', 'creating')
    .execute();
  return 'done';
}

/** The job's run: advance, queue the next run, or fail the preview for good. */
export async function runPreviewJob(
  ctx: ServiceContext,
  previewId: string,
  job: Pick<JobContext, 'step' | 'attempt'>,
): Promise<void> {
  const p = await previewById(ctx.db, previewId);
  // Deleted meanwhile: its delete took what it made; a branch or deploy begun after
  // that found the preview gone and made nothing.
  if (!p || p.state !== 'creating') return;
  let outcome: Outcome;
  try {
    outcome = await advance(ctx, p);
  } catch (err) {
    if (err instanceof PermanentPreviewError || job.attempt >= PREVIEW_CREATE_ATTEMPTS) {
      await failPreview(ctx, p.id, (err as Error).message);
      return;
    }
    throw err;
  }
  if (outcome === 'again') {
    // Recorded: a rerun of this very run (after a crash) does not queue a second one.
    await job.step('next', async () => {
      await enqueue(
        ctx.db,
        ctx.jobs,
        'previews.create',
        { previewId },
        { runAt: new Date(Date.now() + AGAIN_MS) },
      );
    });
  }
}
