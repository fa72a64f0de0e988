/**
 * Bucket attachments (spec 2.7, CONTRACT 3): an app gets its own key to one bucket and
 * the managed secrets that tell it where and how to reach it. Detaching revokes the key
 * and removes the secrets; neither can be touched through the secrets routes.
 */
import type { BucketAttachment as Attachment } from '../../contracts/buckets.js';
import { servicesUrl, type Config } from '../../config.js';
import { ApiError } from '../../errors/api-error.js';
import type { Executor, Tx } from '../../store/db.js';
import { findApp, type AppRow } from '../apps/records.js';
import type { ServiceContext } from '../context.js';
import { insertManagedSecret } from '../secrets.js';
import { findBucket, type BucketRow } from './records.js';
import { mintS3Key, revokeS3Key } from './s3-keys.js';

export function injectedNames(prefix: string): Record<string, string> {
  const p = prefix ? `${prefix}_` : '';
  return {
    endpoint: `${p}S3_ENDPOINT`,
    bucket: `${p}S3_BUCKET`,
    region: `${p}S3_REGION`,
    accessKeyId: `${p}S3_ACCESS_KEY_ID`,
    secretAccessKey: `${p}S3_SECRET_ACCESS_KEY`,
    forcePathStyle: `${p}S3_FORCE_PATH_STYLE`,
  };
}

/** The S3 endpoint an attached app's machines get: the gateway on the services listener. */
/** Whether any bucket is attached to app `appId` (its machines then need the S3 endpoint). */
export async function hasBucketAttachments(db: Executor, appId: string): Promise<boolean> {
  const row = await db
    .selectFrom('bucket_attachments')
    .select('app_id')
    .where('app_id', '=', appId)
    .limit(1)
    .executeTakeFirst();
  return row !== undefined;
}

export function machineS3Endpoint(config: Pick<Config, 'servicesHost' | 'servicesPort'>): string {
  return `${servicesUrl(config)}/s3`;
}

export async function attachBucket(
  ctx: ServiceContext,
  orgId: string,
  appName: string,
  bucketName: string,
  prefix: string | undefined,
): Promise<Attachment> {
  return ctx.db.transaction().execute(async (tx) => {
    const app = await findApp(tx, orgId, appName, { lock: true });
    const bucket = await findBucket(tx, orgId, bucketName);
    return attachBucketWithin(tx, ctx, app, bucket, prefix);
  });
}

/**
 * Attaches `bucket` to `app` inside the caller's transaction, which holds the app's row:
 * a key of its own (read-only for a preview: GET and HEAD only) and the managed secrets.
 */
export async function attachBucketWithin(
  tx: Tx,
  ctx: ServiceContext,
  app: AppRow,
  bucket: BucketRow,
  prefix: string | undefined,
  opts: { readOnly?: boolean } = {},
): Promise<Attachment> {
  const existing = await tx
    .selectFrom('bucket_attachments')
    .select('app_id')
    .where('app_id', '=', app.id)
    .where('bucket_id', '=', bucket.id)
    .executeTakeFirst();
  if (existing)
    throw new ApiError(
      'already-attached',
      `The bucket '${bucket.name}' is already attached to '${app.name}'.`,
    );
  const names = injectedNames(prefix ?? '');
  const taken = await tx
    .selectFrom('secrets')
    .select('name')
    .where('app_id', '=', app.id)
    .where('name', 'in', Object.values(names))
    .execute();
  if (taken.length > 0) {
    throw new ApiError(
      'conflict',
      `The app already has ${taken.map((t) => t.name).join(', ')}; choose another prefix with \`as\`.`,
    );
  }
  const key = await mintS3Key(tx, ctx, {
    orgId: app.org_id,
    bucketId: bucket.id,
    purpose: 'attachment',
    readOnly: opts.readOnly === true,
  });
  const values: Record<string, string> = {
    // The gateway as the app's machines reach it (not the public URL), over TLS.
    [names.endpoint!]: machineS3Endpoint(ctx.config),
    [names.bucket!]: bucket.name,
    [names.region!]: ctx.config.region,
    [names.accessKeyId!]: key.accessKeyId,
    [names.secretAccessKey!]: key.secretAccessKey,
    [names.forcePathStyle!]: 'true',
  };
  const now = ctx.clock();
  for (const [name, value] of Object.entries(values)) {
    await insertManagedSecret(tx, ctx, app.id, name, value, 'attachment');
  }
  const injected = Object.keys(values).sort();
  await tx
    .insertInto('bucket_attachments')
    .values({
      app_id: app.id,
      bucket_id: bucket.id,
      prefix: prefix ?? '',
      key_id: key.accessKeyId,
      injected,
      created_at: now,
    })
    .execute();
  return { appName: app.name, bucketName: bucket.name, injected };
}

/** Detaches inside the caller's transaction (also used when a bucket is force-deleted). */
export async function detachBucketFromApp(
  tx: Tx,
  ctx: ServiceContext,
  orgId: string,
  appName: string,
  bucket: BucketRow,
): Promise<Attachment> {
  const app = await findApp(tx, orgId, appName, { lock: true });
  const row = await tx
    .deleteFrom('bucket_attachments')
    .where('app_id', '=', app.id)
    .where('bucket_id', '=', bucket.id)
    .returning(['key_id', 'injected'])
    .executeTakeFirst();
  if (!row)
    throw new ApiError(
      'not-attached',
      `The bucket '${bucket.name}' is not attached to '${appName}'.`,
    );
  await revokeS3Key(tx, ctx, row.key_id);
  if (row.injected.length) {
    await tx
      .deleteFrom('secrets')
      .where('app_id', '=', app.id)
      .where('name', 'in', row.injected)
      .execute();
  }
  return { appName, bucketName: bucket.name, injected: row.injected };
}

/**
 * Detaches every bucket of the app `appId` inside the caller's transaction, as the app is
 * deleted (apps/teardown.ts): each key revoked, its managed secrets and row removed.
 */
export async function detachAppBuckets(tx: Tx, ctx: ServiceContext, appId: string): Promise<void> {
  const rows = await tx
    .deleteFrom('bucket_attachments')
    .where('app_id', '=', appId)
    .returning(['key_id', 'injected'])
    .execute();
  for (const row of rows) {
    await revokeS3Key(tx, ctx, row.key_id);
    if (row.injected.length) {
      await tx
        .deleteFrom('secrets')
        .where('app_id', '=', appId)
        .where('name', 'in', row.injected)
        .execute();
    }
  }
}

export async function detachBucket(
  ctx: ServiceContext,
  orgId: string,
  appName: string,
  bucketName: string,
) {
  return ctx.db.transaction().execute(async (tx) => {
    const bucket = await findBucket(tx, orgId, bucketName);
    return detachBucketFromApp(tx, ctx, orgId, appName, bucket);
  });
}

export async function listBucketAttachments(ex: Executor, orgId: string): Promise<Attachment[]> {
  const rows = await ex
    .selectFrom('bucket_attachments as a')
    .innerJoin('apps', 'apps.id', 'a.app_id')
    .innerJoin('buckets as b', 'b.id', 'a.bucket_id')
    .select(['apps.name as appName', 'b.name as bucketName', 'a.injected'])
    .where('b.org_id', '=', orgId)
    .orderBy('apps.name')
    .orderBy('b.name')
    .execute();
  return rows;
}
