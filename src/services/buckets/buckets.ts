/**
 * Buckets (spec 2.7, 4.5): named in the platform-wide namespace; their objects' bytes
 * live in the blob store under the bucket's id, their metadata in PostgreSQL.
 */
import { bucketNameSchema, type Bucket } from '../../contracts/buckets.js';
import { ApiError } from '../../errors/api-error.js';
import { newId } from '../../crypto/tokens.js';
import { enqueue } from '../../jobs/queue.js';
import type { ServiceContext } from '../context.js';
import { claimName, nameAvailability, releaseName } from '../names.js';
import { detachBucketFromApp } from './attachments.js';
import { announceCorsChanged } from './cors.js';
import { findBucket, type BucketRow } from './records.js';
import { announceS3KeyRevoked, mintS3Key } from './s3-keys.js';

// The routes find buckets through this file too.
export { findBucket, type BucketRow } from './records.js';

export function toBucket(r: BucketRow): Bucket {
  return {
    id: r.id,
    name: r.name,
    orgId: r.org_id,
    backendRef: r.backend_ref,
    createdAt: r.created_at.toISOString(),
  };
}

export async function createBucket(
  ctx: ServiceContext,
  orgId: string,
  name: string,
): Promise<Bucket> {
  const row = await ctx.db.transaction().execute(async (tx) => {
    await claimName(tx, orgId, name, 'bucket');
    const id = newId('bkt');
    const created = await tx
      .insertInto('buckets')
      .values({
        id,
        org_id: orgId,
        name,
        backend_ref: `${ctx.blobs.kind}:${id}`,
        created_at: ctx.clock(),
      })
      .returning(['id', 'org_id', 'name', 'backend_ref', 'created_at'])
      .executeTakeFirstOrThrow();
    // The platform's own key of the bucket signs presigned URLs.
    await mintS3Key(tx, ctx, { orgId, bucketId: id, purpose: 'presign' });
    return created;
  });
  return toBucket(row);
}

export async function listBuckets(ctx: ServiceContext, orgId: string): Promise<Bucket[]> {
  const rows = await ctx.db
    .selectFrom('buckets')
    .select(['id', 'org_id', 'name', 'backend_ref', 'created_at'])
    .where('org_id', '=', orgId)
    .orderBy('name')
    .execute();
  return rows.map(toBucket);
}

export async function bucketNameAvailability(ctx: ServiceContext, orgId: string, name: string) {
  // Bucket names are stricter than the shared namespace (3–63 characters): a name no
  // bucket can have is invalid here, as creating it would be refused.
  const reason = bucketNameSchema.safeParse(name).success
    ? await nameAvailability(ctx.db, orgId, name)
    : 'invalid';
  return reason ? { name, available: false, reason } : { name, available: true };
}

export interface DeleteBucketAnswer {
  destroyed: boolean;
  deletedObjects: number;
  detached: string[];
}

/**
 * Deletes a bucket. Without `force` a bucket that holds objects or is attached to an app
 * is refused (409); with `force` its objects are deleted and every app is detached (its
 * key revoked, its managed secrets removed). The bytes are removed by a durable job.
 */
export async function deleteBucket(
  ctx: ServiceContext,
  orgId: string,
  name: string,
  force: boolean,
): Promise<DeleteBucketAnswer> {
  return ctx.db.transaction().execute(async (tx) => {
    const bucket = await findBucket(tx, orgId, name);
    await tx.selectFrom('buckets').select('id').where('id', '=', bucket.id).forUpdate().execute();
    const { n } = await tx
      .selectFrom('objects')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('bucket_id', '=', bucket.id)
      .executeTakeFirstOrThrow();
    const objects = Number(n);
    const attachments = await tx
      .selectFrom('bucket_attachments as a')
      .innerJoin('apps', 'apps.id', 'a.app_id')
      .select(['apps.name'])
      .where('a.bucket_id', '=', bucket.id)
      .orderBy('apps.name')
      .execute();
    if (!force && objects > 0) {
      throw new ApiError(
        'bucket-not-empty',
        `The bucket '${name}' holds ${objects} objects; delete them or pass force=true.`,
      );
    }
    if (!force && attachments.length > 0) {
      throw new ApiError(
        'bucket-attached',
        `The bucket '${name}' is attached to ${attachments.map((a) => a.name).join(', ')}; detach it or pass force=true.`,
      );
    }
    for (const a of attachments) await detachBucketFromApp(tx, ctx, orgId, a.name, bucket);
    // Its other keys (the presign key, people's keys) go with it by cascade: tell every
    // gateway to drop them from its cache when this commits, as a revocation does.
    const keys = await tx
      .selectFrom('s3_keys')
      .select('id')
      .where('bucket_id', '=', bucket.id)
      .where('revoked_at', 'is', null)
      .execute();
    for (const k of keys) await announceS3KeyRevoked(tx, ctx, k.id);
    // Its CORS rules go too: a bucket made later under this name must not inherit them.
    await announceCorsChanged(tx, ctx, bucket.name);
    await tx.deleteFrom('buckets').where('id', '=', bucket.id).execute();
    await releaseName(tx, orgId, name);
    await enqueue(tx, ctx.jobs, 'buckets.purge', { ns: bucket.id });
    return { destroyed: true, deletedObjects: objects, detached: attachments.map((a) => a.name) };
  });
}
