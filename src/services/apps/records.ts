/**
 * The app row and the one way to it: every family that acts on an app (secrets,
 * attachments, machines, SSH) finds it here, scoped by the caller's organization, so
 * another organization's app is simply not found. This file imports no other family, so
 * any of them can import it.
 */
import type { App } from '../../contracts/apps.js';
import { notFound } from '../../errors/api-error.js';
import type { Executor } from '../../store/db.js';
import type { ServiceContext } from '../context.js';

export interface AppRow {
  id: string;
  name: string;
  org_id: string;
  created_at: Date;
}

/** An app as the API answers it (`appSchema` of src/contracts/apps.ts). */
export type { App };

/** `<app>.<public host>`, or `<app>.<PIER_APPS_DOMAIN>` (on the public URL's port). */
function defaultAddress(publicUrl: string, appsDomain: string | undefined, name: string): string {
  const u = new URL(publicUrl);
  const host = appsDomain ? `${appsDomain.toLowerCase()}${u.port ? `:${u.port}` : ''}` : u.host;
  return `${u.protocol}//${name}.${host}`;
}

/** The default address of the app named `name` (`https://<name>.<apps domain>`). */
export function defaultAddressOf(ctx: ServiceContext, name: string): string {
  return defaultAddress(ctx.config.publicUrl, ctx.config.appsDomain, name);
}

export function toApp(ctx: ServiceContext, r: AppRow): App {
  return {
    id: r.id,
    name: r.name,
    orgId: r.org_id,
    createdAt: r.created_at.toISOString(),
    defaultAddress: defaultAddress(ctx.config.publicUrl, ctx.config.appsDomain, r.name),
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
