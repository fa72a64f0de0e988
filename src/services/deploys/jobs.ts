/**
 * The durable job of a deploy: `deploys.run` takes a pending deploy to `running`, makes
 * its release (prepare-release.ts), moves the machines (roll.ts) and puts the release
 * live, or ends `error` with why, taking back the machines it made. Each step reads its
 * progress from the store, so a rerun after a crash resumes it.
 */
import { z } from 'zod';
import { ApiError } from '../../errors/api-error.js';
import { defineJob, exponentialBackoff } from '../../jobs/catalogue.js';
import { crashPoint } from '../../jobs/crash-points.js';
import type { ServiceContext } from '../context.js';
import { waitForState } from '../machines/machines.js';
import { machinesQuery } from '../machines/records.js';
import { machineAction } from '../machines/lifecycle.js';
import { DeployFailure } from './failure.js';
import { prepareRelease } from './prepare-release.js';
import { deploysQuery, releaseConfig, releasesQuery, type DeployRow } from './records.js';
import { removeNewMachines, rollMachines } from './roll.js';

export function deployJobs(get: () => ServiceContext) {
  return [
    defineJob({
      kind: 'deploys.run',
      payload: z.object({ deployId: z.string() }),
      maxAttempts: 3,
      backoffMs: exponentialBackoff(2000),
      async run({ deployId }, job) {
        const ctx = get();
        let row = await load(ctx, deployId);
        if (!row || row.status === 'done' || row.status === 'error') return;
        const step = async (text: string) => {
          await ctx.db
            .updateTable('deploys')
            .set({ step: text })
            .where('id', '=', deployId)
            .execute();
        };
        await ctx.db
          .updateTable('deploys')
          .set({ status: 'running' })
          .where('id', '=', deployId)
          .execute();
        try {
          if (!row.release_id)
            await step(
              row.image.startsWith('build:') ? 'preparing the release' : `pulling ${row.image}`,
            );
          const releaseId = await prepareRelease(ctx, row, job.signal);
          await crashPoint('deploys.run', 'release-made', job.attempt);
          row = (await load(ctx, deployId))!;
          const release = await releasesQuery(ctx.db)
            .where('releases.id', '=', releaseId)
            .executeTakeFirstOrThrow();
          await rollMachines(ctx, {
            deploy: row,
            releaseId,
            config: releaseConfig(release),
            count: row.machine_count ?? 1,
            step,
            signal: job.signal,
          });
          await crashPoint('deploys.run', 'rolled', job.attempt);
          await goLive(ctx, row, releaseId);
        } catch (err) {
          // Interrupted by shutdown: the next try resumes from the store.
          if (job.signal.aborted) throw err;
          const reason =
            err instanceof DeployFailure || err instanceof ApiError
              ? err.message
              : `The deploy failed on the host: ${(err as Error).message}`;
          if (!(err instanceof DeployFailure)) ctx.log.warn({ err, deployId }, 'deploy failed');
          await fail(ctx, deployId, reason);
        }
      },
    }),
  ];
}

/**
 * An app with a volume had its one machine stopped for the new one (machines/replace.ts
 * starts it again when the new one fails): the deploy ends once it serves again.
 */
async function settleOldMachines(ctx: ServiceContext, deploy: DeployRow): Promise<void> {
  const volume = await ctx.db
    .selectFrom('volumes')
    .select('id')
    .where('app_id', '=', deploy.app_id)
    .executeTakeFirst();
  if (!volume) return;
  const old = await machinesQuery(ctx.db)
    .where('machines.app_id', '=', deploy.app_id)
    .where('machines.observed_state', 'not in', ['deleted', 'failed'])
    .execute();
  for (const m of old) {
    // Started here, or by the replace already (then this is a no-op or busy).
    await machineAction(ctx, deploy.org_id, m.id, 'start').catch(() => undefined);
    await waitForState(ctx, deploy.org_id, m.id, ['running', 'failed'], 90_000).catch(
      (err: unknown) => ctx.log.warn({ err, machine: m.id }, 'deploy: old machine not back'),
    );
  }
}

async function load(ctx: ServiceContext, id: string): Promise<DeployRow | undefined> {
  return deploysQuery(ctx.db).where('deploys.id', '=', id).executeTakeFirst();
}

/** The release goes live, the one before it is superseded, and the deploy is done. */
async function goLive(ctx: ServiceContext, deploy: DeployRow, releaseId: string): Promise<void> {
  await ctx.db.transaction().execute(async (tx) => {
    const now = ctx.clock();
    await tx
      .updateTable('releases')
      .set({ status: 'superseded' })
      .where('app_id', '=', deploy.app_id)
      .where('status', '=', 'live')
      .execute();
    await tx
      .updateTable('releases')
      .set({ status: 'live', live_at: now })
      .where('id', '=', releaseId)
      .execute();
    await tx
      .updateTable('deploys')
      .set({ status: 'done', step: null, finished_at: now })
      .where('id', '=', deploy.id)
      .execute();
  });
}

/** The deploy ends `error`: its machines are taken back, its release is `failed`. */
async function fail(ctx: ServiceContext, deployId: string, reason: string): Promise<void> {
  const row = await load(ctx, deployId);
  if (!row) return;
  if (row.release_id) {
    await removeNewMachines(ctx, row, row.release_id);
    await ctx.db
      .updateTable('releases')
      .set({ status: 'failed' })
      .where('id', '=', row.release_id)
      .execute();
  }
  // The old machines serve on: none of them was retired before the new ones ran. One
  // stopped for a volume is being started again: the deploy ends once it is back.
  await ctx.db
    .updateTable('machines')
    .set({ retiring_at: null })
    .where('app_id', '=', row.app_id)
    .where('observed_state', '<>', 'deleted')
    .execute();
  await settleOldMachines(ctx, row);
  await ctx.db
    .updateTable('deploys')
    .set({ status: 'error', step: null, error: reason.slice(0, 2000), finished_at: new Date() })
    .where('id', '=', deployId)
    .execute();
}
