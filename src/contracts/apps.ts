/**
 * Apps (CONTRACT 3; spec 2.13 other records): create, list, read, delete, and the attach
 * and detach of buckets, databases and volumes (each attachment's record lives with its
 * family: buckets.ts, databases.ts, volumes.ts).
 */
import { z } from 'zod';
import { attachPrefixSchema, bucketAttachmentSchema } from './buckets.js';
import { resourceNameSchema } from './common.js';
import { databaseAttachmentSchema } from './databases.js';
import { volumeAttachmentSchema } from './volumes.js';

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

export const appListSchema = z.array(appSchema);

export const appParams = z.object({ name: z.string().max(63) });

const resourceRef = z.string().min(1).max(63);

export const attachBody = z.union([
  z.strictObject({ bucket: resourceRef, as: attachPrefixSchema.optional() }),
  z.strictObject({ database: resourceRef }),
  z.strictObject({ volume: resourceRef }),
]);
export type AttachBody = z.output<typeof attachBody>;

export const detachBody = z.union([
  z.strictObject({ bucket: resourceRef }),
  z.strictObject({ database: resourceRef }),
  z.strictObject({ volume: resourceRef }),
]);
export type DetachBody = z.output<typeof detachBody>;

/** What an attach or detach answers: the attachment of the family named in the body. */
export const attachmentAnswerSchema = z.union([
  bucketAttachmentSchema,
  databaseAttachmentSchema,
  volumeAttachmentSchema,
]);
export type AttachmentAnswer = z.infer<typeof attachmentAnswerSchema>;
