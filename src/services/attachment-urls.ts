/**
 * Keeps what attachments injected in step with the settings. The URLs an attached app's
 * machines get (`DATABASE_URL` / `REDIS_URL`, `S3_ENDPOINT`) name the services host and
 * port, so a changed `PIER_SERVICES_HOST` or `PIER_SERVICES_PORT` (or an attachment made
 * before machines had URLs of their own) would leave stale values in the secrets. At
 * start, each one is written again where it differs; machines see it at their next start.
 */
import { injectedNames, machineS3Endpoint } from './buckets/attachments.js';
import type { ServiceContext } from './context.js';
import { machineConnectionUrl, passwordOf } from './databases/records.js';
import { refreshManagedSecret } from './secrets.js';

/** Rewrites stale attachment URLs; returns how many secrets changed. */
export async function refreshAttachmentUrls(ctx: ServiceContext): Promise<number> {
  return ctx.db.transaction().execute(async (tx) => {
    let changed = 0;
    const databases = await tx
      .selectFrom('database_attachments as a')
      .innerJoin('databases as d', 'd.id', 'a.database_id')
      .selectAll('d')
      .select(['a.app_id as attachedAppId', 'a.secret_name as secretName'])
      .execute();
    for (const row of databases) {
      const url = machineConnectionUrl(ctx.config, row, passwordOf(ctx.box, row));
      if (await refreshManagedSecret(tx, ctx, row.attachedAppId, row.secretName, url)) changed++;
    }
    const buckets = await tx
      .selectFrom('bucket_attachments')
      .select(['app_id', 'prefix'])
      .execute();
    const endpoint = machineS3Endpoint(ctx.config);
    for (const b of buckets) {
      const name = injectedNames(b.prefix).endpoint!;
      if (await refreshManagedSecret(tx, ctx, b.app_id, name, endpoint)) changed++;
    }
    return changed;
  });
}
