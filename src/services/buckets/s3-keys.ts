/**
 * S3 access keys. Each reaches exactly one bucket. The secret is needed to check HMAC
 * signatures, so it is sealed with the master key (never hashed, never logged), and it
 * is shown once, when minted.
 */
import { randomInt } from 'node:crypto';
import { sql } from 'kysely';
import { INVALIDATION_CHANNEL } from '../authenticator.js';
import { notFound } from '../../errors/api-error.js';
import { randomBase62 } from '../../crypto/tokens.js';
import type { Executor } from '../../store/db.js';
import type { ServiceContext } from '../context.js';
import { S3_KEY_KIND, type S3KeyGrant } from './caches.js';
import { findBucket } from './records.js';

export type { S3KeyGrant } from './caches.js';

const ID_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';

export type S3KeyPurpose = 'presign' | 'attachment' | 'person';

export interface MintedS3Key {
  accessKeyId: string;
  secretAccessKey: string;
  createdAt: Date;
}

function newAccessKeyId(): string {
  let s = 'PIER';
  for (let i = 0; i < 16; i++) s += ID_ALPHABET[randomInt(ID_ALPHABET.length)];
  return s;
}

function binding(accessKeyId: string): string {
  return `s3-key:${accessKeyId}`;
}

export async function mintS3Key(
  ex: Executor,
  ctx: ServiceContext,
  grant: { orgId: string; bucketId: string; purpose: S3KeyPurpose; readOnly?: boolean },
): Promise<MintedS3Key> {
  const accessKeyId = newAccessKeyId();
  const secretAccessKey = randomBase62(40);
  const sealed = ctx.box.seal(secretAccessKey, binding(accessKeyId));
  const createdAt = ctx.clock();
  await ex
    .insertInto('s3_keys')
    .values({
      id: accessKeyId,
      org_id: grant.orgId,
      bucket_id: grant.bucketId,
      purpose: grant.purpose,
      secret_nonce: sealed.nonce,
      secret_ciphertext: sealed.ciphertext,
      created_at: createdAt,
      read_only: grant.readOnly === true,
    })
    .execute();
  return { accessKeyId, secretAccessKey, createdAt };
}

/** The live key with this id, its bucket and its secret; undefined when unknown or revoked. */
export async function findS3Key(
  ctx: ServiceContext,
  accessKeyId: string,
): Promise<S3KeyGrant | undefined> {
  if (!/^PIER[A-Z2-7]{16}$/.test(accessKeyId)) return undefined;
  const row = await ctx.db
    .selectFrom('s3_keys as k')
    .innerJoin('buckets as b', 'b.id', 'k.bucket_id')
    .innerJoin('orgs as o', 'o.id', 'k.org_id')
    .select([
      'k.id',
      'k.org_id',
      'k.bucket_id',
      'b.name',
      'k.secret_nonce',
      'k.secret_ciphertext',
      'k.read_only',
      'o.suspended_at',
    ])
    .where('k.id', '=', accessKeyId)
    .where('k.revoked_at', 'is', null)
    .executeTakeFirst();
  if (!row) return undefined;
  return {
    accessKeyId: row.id,
    orgId: row.org_id,
    bucketId: row.bucket_id,
    bucketName: row.name,
    suspended: row.suspended_at !== null,
    readOnly: row.read_only,
    secret: ctx.box.open(
      { nonce: row.secret_nonce, ciphertext: row.secret_ciphertext },
      binding(row.id),
    ),
  };
}

/** The platform's own key of a bucket, which signs the URLs of the presign route. */
export async function presignKeyOf(ctx: ServiceContext, bucketId: string): Promise<S3KeyGrant> {
  const row = await ctx.db
    .selectFrom('s3_keys')
    .select('id')
    .where('bucket_id', '=', bucketId)
    .where('purpose', '=', 'presign')
    .where('revoked_at', 'is', null)
    .orderBy('created_at')
    .executeTakeFirst();
  const grant = row ? await findS3Key(ctx, row.id) : undefined;
  if (!grant) throw new Error(`bucket ${bucketId} has no presign key`);
  return grant;
}

/**
 * Revokes a key in the caller's transaction. The invalidation NOTIFY is sent in the same
 * transaction, so every other replica drops the key when the revocation commits; this one
 * drops it at once (announceS3KeyRevoked).
 */
export async function revokeS3Key(
  ex: Executor,
  ctx: ServiceContext,
  accessKeyId: string,
): Promise<void> {
  await ex
    .updateTable('s3_keys')
    .set({ revoked_at: ctx.clock() })
    .where('id', '=', accessKeyId)
    .execute();
  await announceS3KeyRevoked(ex, ctx, accessKeyId);
}

/**
 * Tells every replica that a key no longer works: a NOTIFY in the caller's transaction,
 * heard by every replica when it commits, and this replica's cache dropped at once (the
 * NOTIFY reaches it too, but after a round trip through PostgreSQL, and a client that
 * revokes a key and then uses it must be refused).
 */
export async function announceS3KeyRevoked(
  ex: Executor,
  ctx: ServiceContext,
  accessKeyId: string,
): Promise<void> {
  await sql`SELECT pg_notify(${INVALIDATION_CHANNEL}, ${`${S3_KEY_KIND}:${accessKeyId}`})`.execute(
    ex,
  );
  // Inside a transaction this runs before the commit; a request that caches the key again
  // meanwhile is corrected by the NOTIFY, which is delivered with the commit.
  ctx.bucketCaches.grants.drop(accessKeyId);
}

/** The live key with this id as the gateway checks it, from this process's cache when fresh. */
export function grantOf(ctx: ServiceContext, accessKeyId: string): Promise<S3KeyGrant | undefined> {
  return ctx.bucketCaches.grants.get(accessKeyId, () => findS3Key(ctx, accessKeyId));
}

/** S3 credentials for a person's tools (aws, s3cmd, SDKs): the secret is in this answer only. */
export async function createPersonKey(ctx: ServiceContext, orgId: string, bucketName: string) {
  const bucket = await findBucket(ctx.db, orgId, bucketName);
  const { createdAt, ...key } = await mintS3Key(ctx.db, ctx, {
    orgId,
    bucketId: bucket.id,
    purpose: 'person',
  });
  return {
    ...key,
    bucket: bucket.name,
    purpose: 'person' as const,
    endpoint: `${ctx.config.publicUrl}/s3`,
    region: ctx.config.region,
    forcePathStyle: true,
    // The stored time, so the list shows the same one.
    createdAt: createdAt.toISOString(),
  };
}

export async function listBucketKeys(ctx: ServiceContext, orgId: string, bucketName: string) {
  const bucket = await findBucket(ctx.db, orgId, bucketName);
  const rows = await ctx.db
    .selectFrom('s3_keys')
    .select(['id', 'purpose', 'created_at'])
    .where('bucket_id', '=', bucket.id)
    .where('revoked_at', 'is', null)
    .where('purpose', '!=', 'presign')
    .orderBy('created_at')
    .execute();
  return rows.map((r) => ({
    accessKeyId: r.id,
    bucket: bucket.name,
    purpose: r.purpose,
    createdAt: r.created_at.toISOString(),
  }));
}

/** Revokes a person's key; attachment keys go with their attachment (detach instead). */
export async function deletePersonKey(
  ctx: ServiceContext,
  orgId: string,
  bucketName: string,
  accessKeyId: string,
) {
  const bucket = await findBucket(ctx.db, orgId, bucketName);
  const res = await ctx.db
    .updateTable('s3_keys')
    .set({ revoked_at: ctx.clock() })
    .where('id', '=', accessKeyId)
    .where('bucket_id', '=', bucket.id)
    .where('purpose', '=', 'person')
    .where('revoked_at', 'is', null)
    .executeTakeFirst();
  if (res.numUpdatedRows === 0n) throw notFound('S3 key');
  await announceS3KeyRevoked(ctx.db, ctx, accessKeyId);
}
