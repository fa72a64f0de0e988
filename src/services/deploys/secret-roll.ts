/**
 * `staged: false` (spec 4.10): new secret values roll the app at once. An app with a live
 * release gets a deploy of that release's image and config with today's values (a new
 * release), in the transaction that writes the values; the machines it replaces are the
 * answer's `restarted`. Machines made outside deploys take the values at their next
 * start, as before.
 */
import type { Executor } from '../../store/db.js';
import type { ServiceContext } from '../context.js';
import { insertDeploy } from './deploys.js';
import { releaseConfig, liveRelease } from './records.js';

export function rollForSecrets(ctx: ServiceContext, orgId: string) {
  return async (tx: Executor, appId: string): Promise<string[]> => {
    const live = await liveRelease(tx, appId);
    if (!live) return [];
    await insertDeploy(tx, ctx, orgId, appId, {
      image: live.image,
      config: releaseConfig(live),
      strategy: 'rolling',
    });
    const machines = await tx
      .selectFrom('machines')
      .select('id')
      .where('app_id', '=', appId)
      .where('observed_state', 'not in', ['deleted', 'failed'])
      .orderBy('created_at')
      .execute();
    return machines.map((m) => m.id);
  };
}
