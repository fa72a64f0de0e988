/**
 * An app's network policy (spec 4.6): `bandwidthMbit` and `newConnectionsPerMinute`
 * (null: no limit), `reason` kept. Enforced on the app's machines on this host
 * (runtime/sandbox/network-policy.ts): at once on PUT for the running ones, and for every
 * machine whenever its row changes (a start, a wake), see network-policy-apply.ts.
 */
import type { NetworkPolicy, PutNetworkPolicyBody } from '../../contracts/network-policy.js';
import type { ServiceContext } from '../context.js';
import { applyToApp } from './network-policy-apply.js';
import { findApp } from './records.js';

export async function getNetworkPolicy(
  ctx: ServiceContext,
  orgId: string,
  appName: string,
): Promise<NetworkPolicy> {
  const app = await findApp(ctx.db, orgId, appName);
  const row = await ctx.db
    .selectFrom('app_network_policy')
    .selectAll()
    .where('app_id', '=', app.id)
    .executeTakeFirst();
  return {
    appName: app.name,
    bandwidthMbit: row?.bandwidth_mbit ?? null,
    newConnectionsPerMinute: row?.new_connections_per_minute ?? null,
    ...(row?.reason ? { reason: row.reason } : {}),
    ...(row ? { updatedAt: row.updated_at.toISOString() } : {}),
  };
}

export async function putNetworkPolicy(
  ctx: ServiceContext,
  orgId: string,
  appName: string,
  body: PutNetworkPolicyBody,
): Promise<NetworkPolicy> {
  const app = await findApp(ctx.db, orgId, appName);
  const values = {
    bandwidth_mbit: body.bandwidthMbit,
    new_connections_per_minute: body.newConnectionsPerMinute,
    reason: body.reason ?? null,
    updated_at: ctx.clock(),
  };
  await ctx.db
    .insertInto('app_network_policy')
    .values({ app_id: app.id, ...values })
    .onConflict((oc) => oc.column('app_id').doUpdateSet(values))
    .execute();
  const appliedTo = await applyToApp(ctx, app.id);
  return { ...(await getNetworkPolicy(ctx, orgId, appName)), appliedTo };
}
