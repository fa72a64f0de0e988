/**
 * Sources, detect and builds (CONTRACT 7): an uploaded source tree, what detect finds in
 * it, and a build's record (`state`: queued -> building -> done | failed).
 */
import { z } from 'zod';

export const sourceSchema = z.object({
  id: z.string(),
  app: z.string(),
  sizeBytes: z.number(),
  sha256: z.string(),
  files: z.number(),
  createdAt: z.string(),
});
export type Source = z.infer<typeof sourceSchema>;

const sourceId = z.string().min(1).max(64);

/** A path inside the source: relative, no `..`. */
const innerPath = z
  .string()
  .min(1)
  .max(512)
  .refine((p) => !p.startsWith('/') && !p.split('/').includes('..'), {
    message: 'must be a path inside the source (relative, no "..")',
  });

export const detectBody = z.strictObject({ source: sourceId });

export const builderSchema = z.enum(['dockerfile', 'static', 'node', 'python', 'go']);
export type BuilderKind = z.infer<typeof builderSchema>;

export const detectionSchema = z.object({
  builder: builderSchema,
  startCommand: z.string().optional(),
  internalPort: z.number().optional(),
  dockerfile: z.string().optional(),
  notes: z.array(z.string()),
});
export type Detection = z.infer<typeof detectionSchema>;

export const createBuildBody = z.strictObject({
  source: sourceId,
  dockerfile: innerPath.optional(),
});

export const buildStateSchema = z.enum(['queued', 'building', 'done', 'failed']);

export const buildSchema = z.object({
  id: z.string(),
  app: z.string(),
  source: z.string(),
  state: buildStateSchema,
  builder: builderSchema.optional(),
  startCommand: z.string().optional(),
  internalPort: z.number().optional(),
  createdAt: z.string(),
  startedAt: z.string().optional(),
  finishedAt: z.string().optional(),
  imageDigest: z.string().optional(),
  error: z.string().optional(),
});
export type Build = z.infer<typeof buildSchema>;

export const buildListSchema = z.array(buildSchema);

export const buildIdParams = z.object({ id: z.string().max(64) });

export const buildLogsQuery = z.object({ follow: z.enum(['0', '1']).optional() });
