/**
 * Apps (CONTRACT 3): named in the platform-wide namespace, counted against the
 * organization's app limit. Every query is scoped by the caller's organization, so
 * another organization's app is simply not found.
 */
import { z } from 'zod';
import { ApiError, notFound } from '../errors/api-error.js';
import { newId } from '../crypto/tokens.js';
import type { Executor } from '../store/db.js';
import type { ServiceContext } from './context.js';
import { claimName, releaseName, resourceNameSchema } from './names.js';
import { revokeS3Key } from './buckets/s3-keys.js';
import { liveMachineIds } from './machines/records.js';

export const appNameSchema = resourceNameSchema;

export const createAppBody = z.strictObject({ name: appNameSchema });

export const appSchema = z.object({
  id: z.string(),
  name: z.string(),
  orgId: z.string(),
  createdAt: z.string(),
  defaultAddress: z.string(),
});
export type App = z.infer<typeof appSchema>;

type AppRow = { id: string; name: string; org_id: string; created_at: Date };

function defaultAddress(publicUrl: string, name: string): string {
  const u = new URL(publicUrl);
  return `${u.protocol}//${name}.${u.host}`;
}

export function toApp(ctx: ServiceContext, r: AppRow): App {
  return {
    id: r.id,
    name: r.name,
    orgId: r.org_id,
    createdAt: r.created_at.toISOString(),
    defaultAddress: defaultAddress(ctx.config.publicUrl, r.name),
  };
}

/** The app row of `orgId` named `name`, or 404 (also when another org owns it). */
export async function findApp(
  ex: Executor,
  orgId: string,
  name: string,
  opts: { lock?: boolean } = {},
): Promise<AppRow> {
  let q = ex
    .selectFrom('apps')
    .select(['id', 'name', 'org_id', 'created_at'])
    .where('org_id', '=', orgId)
    .where('name', '=', name);
  // Changes to an app's secrets (by hand or by attachments) hold its row, one at a time.
  if (opts.lock) q = q.forUpdate();
  const row = await q.executeTakeFirst();
  if (!row) throw notFound(`App '${name}'`);
  return row;
}

export async function createApp(ctx: ServiceContext, orgId: string, name: string): Promise<App> {
  const row = await ctx.db.transaction().execute(async (tx) => {
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
  });
  return toApp(ctx, row);
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

/**
 * Deletes the app, its secrets (by cascade) and frees its name. Its machines must be
 * destroyed first (machines/app-teardown.ts does both): one that is not is refused with 409
 * `conflict`, since its row would go with the app's and leave its process unreachable.
 */
export async function deleteApp(ctx: ServiceContext, orgId: string, name: string): Promise<void> {
  await ctx.db.transaction().execute(async (tx) => {
    // Locked, as machine creation locks it: no machine can be added until this commits.
    const app = await findApp(tx, orgId, name, { lock: true });
    const [live] = await liveMachineIds(tx, app.id);
    if (live) {
      throw new ApiError(
        'conflict',
        `App '${name}' has a machine (${live}) that was created while it was being deleted; try again.`,
      );
    }
    // Detach everything: the keys of its bucket attachments stop working with it.
    const keys = await tx
      .selectFrom('bucket_attachments')
      .select('key_id')
      .where('app_id', '=', app.id)
      .execute();
    for (const k of keys) await revokeS3Key(tx, ctx, k.key_id);
    await tx.deleteFrom('apps').where('id', '=', app.id).execute();
    await releaseName(tx, orgId, name);
  });
}
