/**
 * `staged: false` (spec 4.10): new secret values roll the app at once. The app gets a
 * deploy of what it runs (the live release's image and config, else its newest machine's)
 * with today's values (a new release), in the transaction that writes the values; the
 * machines it replaces are the answer's `restarted`. An app without machines has nothing
 * to roll.
 */
import type { Executor } from '../../store/db.js';
import type { ServiceContext } from '../context.js';
import { insertDeploy } from './deploys.js';
import { configOf, machinesQuery } from '../machines/records.js';
import { releaseConfig, liveRelease } from './records.js';

export function rollForSecrets(ctx: ServiceContext, orgId: string) {
  return async (tx: Executor, appId: string): Promise<string[]> => {
    const machines = await machinesQuery(tx)
      .where('machines.app_id', '=', appId)
      .where('machines.observed_state', 'not in', ['deleted', 'failed'])
      .orderBy('machines.created_at')
      .execute();
    const live = await liveRelease(tx, appId);
    const newest = machines.at(-1);
    const runs = live
      ? { image: live.image, config: releaseConfig(live) }
      : newest && { image: configOf(newest).image, config: configOf(newest) };
    if (!runs) return [];
    await insertDeploy(tx, ctx, orgId, appId, { ...runs, strategy: 'rolling' });
    return machines.map((m) => m.id);
  };
}
