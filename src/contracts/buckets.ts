/**
 * Buckets (spec 2.7 bucket and related, 4.5 buckets): buckets and their names, objects
 * through the JSON API, presigned URLs, CORS rules, S3 credentials for people's tools
 * (pier's design), and the attachment of a bucket to an app (CONTRACT 3).
 */
import { z } from 'zod';
import { NAME_PATTERN } from './common.js';

export const bucketNameSchema = z
  .string()
  .min(3)
  .max(63)
  .regex(
    NAME_PATTERN,
    'lowercase letters, digits and hyphens, starting and ending with a letter or digit',
  );

export const createBucketBody = z.strictObject({ name: bucketNameSchema });

export const bucketSchema = z.object({
  id: z.string(),
  name: z.string(),
  orgId: z.string(),
  backendRef: z.string(),
  createdAt: z.string(),
});
export type Bucket = z.infer<typeof bucketSchema>;

export const bucketListSchema = z.array(bucketSchema);

export const bucketParams = z.object({ name: z.string().min(1).max(63) });

/** Any name can be asked about: one no bucket can have answers reason 'invalid'. */
export const bucketNameParams = z.object({ name: z.string().min(1).max(1024) });

export const bucketNameAvailabilitySchema = z.object({
  name: z.string(),
  available: z.boolean(),
  reason: z.enum(['taken', 'taken-by-you', 'reserved', 'invalid']).optional(),
});
export type BucketNameAvailability = z.infer<typeof bucketNameAvailabilitySchema>;

export const deleteBucketQuery = z.strictObject({
  force: z.enum(['true', 'false', '1', '0']).optional(),
});

/** The answer of `DELETE /v1/buckets/:name`. */
export const deletedBucketSchema = z.object({
  destroyed: z.boolean(),
  deletedObjects: z.number(),
  detached: z.array(z.string()),
});
export type DeletedBucket = z.infer<typeof deletedBucketSchema>;

// Objects through the JSON API.

export const objectListQuery = z.strictObject({
  limit: z.coerce.number().int().min(1).max(1000).default(100),
  prefix: z.string().max(1024).optional(),
  cursor: z.string().min(1).max(2048).optional(),
});

export const objectEntrySchema = z.object({
  key: z.string(),
  sizeBytes: z.number(),
  lastModified: z.string(),
});
export type ObjectEntry = z.infer<typeof objectEntrySchema>;

/** One page of `GET /v1/buckets/:name/objects`. */
export const objectPageSchema = z.object({
  bucket: z.string(),
  objects: z.array(objectEntrySchema),
  nextCursor: z.string().optional(),
});
export type ObjectPage = z.infer<typeof objectPageSchema>;

const objectKey = z.string().min(1).max(1024);

/** `key` once, or repeated for several. */
export const deleteObjectsQuery = z.strictObject({
  key: z.union([objectKey, z.array(objectKey).min(1).max(1000)]),
});

export const deletedObjectsSchema = z.object({ bucket: z.string(), deleted: z.array(z.string()) });
export type DeletedObjects = z.infer<typeof deletedObjectsSchema>;

// Presigned URLs.

export const presignBody = z
  .strictObject({
    op: z.enum(['get', 'put']).default('get'),
    key: z.string().min(1).max(1024),
    expiresInS: z.number().int().min(1).max(604_800).default(900),
    contentType: z.string().min(1).max(255).optional(),
  })
  .superRefine((b, ctx) => {
    if (b.contentType !== undefined && b.op !== 'put') {
      ctx.addIssue({ code: 'custom', path: ['contentType'], message: 'only with op put' });
    }
  });
export type PresignBody = z.output<typeof presignBody>;

/** A presigned URL; `requiredHeaders` must be sent exactly or the signature breaks. */
export const presignedSchema = z.object({
  url: z.string(),
  method: z.enum(['GET', 'PUT']),
  key: z.string(),
  expiresAt: z.string(),
  requiredHeaders: z.record(z.string(), z.string()),
});
export type Presigned = z.infer<typeof presignedSchema>;

// CORS rules, in S3's model.

export const CORS_METHODS = ['GET', 'PUT', 'POST', 'DELETE', 'HEAD'] as const;

const wildcardOrigin = z
  .string()
  .min(1)
  .max(256)
  // Answers carry the origin in a header: visible ASCII only, as browsers send it.
  .regex(/^[\x21-\x7e]+$/, 'visible ASCII characters only, no spaces')
  .refine((o) => (o.match(/\*/g) ?? []).length <= 1, 'at most one * per origin');

/**
 * A header name as HTTP defines it (a token; `*` is one of its characters, so `x-amz-*`
 * and `*` pass). These names are written into browsers' answers: a control or non-Latin-1
 * character stored here would make every answer of the bucket fail.
 */
const headerName = z
  .string()
  .min(1)
  .max(256)
  .regex(/^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/, "a header name: letters, digits and !#$%&'*+-.^_`|~");

export const corsRuleSchema = z.strictObject({
  id: z.string().min(1).max(255).optional(),
  allowedMethods: z.array(z.enum(CORS_METHODS)).max(5),
  allowedOrigins: z.array(wildcardOrigin).max(100),
  allowedHeaders: z.array(headerName).max(100).optional(),
  exposeHeaders: z.array(headerName).max(100).optional(),
  maxAgeSeconds: z.number().int().min(0).max(86_400).optional(),
});
export type CorsRuleInput = z.infer<typeof corsRuleSchema>;

export const putCorsBody = z.strictObject({ rules: z.array(corsRuleSchema).max(100) });

/** The CORS rules of a bucket, with the server's notes on rules that cannot match. */
export const corsSchema = z.object({
  rules: z.array(corsRuleSchema),
  warnings: z.array(z.string()).optional(),
});
export type Cors = z.infer<typeof corsSchema>;

// S3 credentials.

export const s3KeySchema = z.object({
  accessKeyId: z.string(),
  bucket: z.string(),
  purpose: z.enum(['presign', 'attachment', 'person']),
  createdAt: z.string(),
});
export type S3Key = z.infer<typeof s3KeySchema>;

export const s3KeyListSchema = z.array(s3KeySchema);

/** The minting answer: the secret (once) and how an S3 client reaches the gateway. */
export const createdS3KeySchema = s3KeySchema.extend({
  secretAccessKey: z.string(),
  endpoint: z.string(),
  region: z.string(),
  forcePathStyle: z.boolean(),
});
export type CreatedS3Key = z.infer<typeof createdS3KeySchema>;

export const s3KeyParams = bucketParams.extend({ accessKeyId: z.string().max(64) });

// Attachments to apps.

/** `as`: an uppercase prefix of the injected names (`MEDIA` → `MEDIA_S3_BUCKET`). */
export const attachPrefixSchema = z
  .string()
  .min(1)
  .max(32)
  .regex(/^[A-Z][A-Z0-9_]*$/, 'uppercase letters, digits and _, starting with a letter')
  .refine((s) => !s.startsWith('PIER'), 'the prefix PIER is reserved by the platform');

export const bucketAttachmentSchema = z.object({
  appName: z.string(),
  bucketName: z.string(),
  injected: z.array(z.string()),
});
export type BucketAttachment = z.infer<typeof bucketAttachmentSchema>;

export const bucketAttachmentListSchema = z.array(bucketAttachmentSchema);
