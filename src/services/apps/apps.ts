/**
 * Apps (CONTRACT 3): named in the platform-wide namespace, counted against the
 * organization's app limit. Every query is scoped by the caller's organization, so
 * another organization's app is simply not found. Deleting one is teardown.ts.
 */
import { ApiError } from '../../errors/api-error.js';
import { newId } from '../../crypto/tokens.js';
import type { ServiceContext } from '../context.js';
import { noteAppOfZoneOrg } from '../domains/memory.js';
import { claimName } from '../names.js';
import type { Tx } from '../../store/db.js';
import { findApp, toApp, type App, type AppRow } from './records.js';

export type { App } from './records.js';

export async function createApp(ctx: ServiceContext, orgId: string, name: string): Promise<App> {
  const row = await ctx.db.transaction().execute((tx) => insertApp(tx, ctx, orgId, name));
  noteAppOfZoneOrg(ctx, orgId, name, true);
  return toApp(ctx, row);
}

/**
 * The app's row, inside the caller's transaction: the organization's app limit checked
 * (403 `org-limit-apps`) and the name claimed. Whoever commits it then calls
 * `noteAppOfZoneOrg` (as createApp does): a preview is made this way with its record.
 */
export async function insertApp(
  tx: Tx,
  ctx: ServiceContext,
  orgId: string,
  name: string,
): Promise<AppRow> {
  // Lock the org row: concurrent creates in one org must not both slip under the limit.
  const org = await tx
    .selectFrom('orgs')
    .select(['limit_apps'])
    .where('id', '=', orgId)
    .forUpdate()
    .executeTakeFirstOrThrow();
  if (org.limit_apps !== null) {
    const { n } = await tx
      .selectFrom('apps')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('org_id', '=', orgId)
      .executeTakeFirstOrThrow();
    const current = Number(n);
    if (current >= org.limit_apps) {
      throw new ApiError(
        'org-limit-apps',
        `The organization has ${current} apps, as many as allowed (${org.limit_apps}).`,
        { limit: org.limit_apps, current },
      );
    }
  }
  await claimName(tx, orgId, name, 'app');
  return tx
    .insertInto('apps')
    .values({ id: newId('app'), org_id: orgId, name, created_at: ctx.clock() })
    .returning(['id', 'name', 'org_id', 'created_at'])
    .executeTakeFirstOrThrow();
}

export async function listApps(ctx: ServiceContext, orgId: string): Promise<App[]> {
  const rows = await ctx.db
    .selectFrom('apps')
    .select(['id', 'name', 'org_id', 'created_at'])
    .where('org_id', '=', orgId)
    .orderBy('name')
    .execute();
  return rows.map((r) => toApp(ctx, r));
}

export async function getApp(ctx: ServiceContext, orgId: string, name: string): Promise<App> {
  return toApp(ctx, await findApp(ctx.db, orgId, name));
}
