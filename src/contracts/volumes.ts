/**
 * Volumes (spec 2.6 volume, 4.4 volumes): create, list, resize, delete, and the
 * attachment of a volume to its app (CONTRACT 3).
 */
import { z } from 'zod';
import { resourceNameSchema } from './common.js';

/** An absolute path inside the machine, not the root and not under the kernel's trees. */
export const mountPathSchema = z
  .string()
  .min(2)
  .max(255)
  .regex(/^\/[A-Za-z0-9._\-/]*$/, 'must be an absolute path of letters, digits, . _ - and /')
  .refine((p) => !p.split('/').includes('..'), 'must not contain ..')
  .refine(
    (p) => !/^\/(proc|sys|dev)(\/|$)/.test(p) && p.replace(/\/+$/, '') !== '',
    'must not be /, /proc, /sys or /dev',
  );

export const VOLUME_CLASSES = ['standard', 'durable'] as const;

export const createVolumeBody = z.strictObject({
  name: resourceNameSchema,
  sizeGb: z.number().int().min(1).max(500).optional(),
  mountPath: mountPathSchema.optional(),
  class: z.enum(VOLUME_CLASSES).optional(),
  flushIntervalS: z.number().int().min(15).max(86_400).optional(),
});
export type CreateVolumeBody = z.infer<typeof createVolumeBody>;

export const updateVolumeBody = z.strictObject({
  sizeGb: z.number().int().min(1).max(500).optional(),
  flushIntervalS: z.number().int().min(15).max(86_400).optional(),
});
export type UpdateVolumeBody = z.infer<typeof updateVolumeBody>;

export const volumeSchema = z.object({
  id: z.string(),
  name: z.string(),
  orgId: z.string(),
  sizeGb: z.number(),
  mountPath: z.string(),
  class: z.enum(VOLUME_CLASSES),
  flushIntervalS: z.number(),
  machineId: z.string().optional(),
  appName: z.string().optional(),
  leaseHost: z.string().optional(),
  leaseGen: z.number(),
  durableGen: z.number(),
  durableAt: z.string().optional(),
  walDurableAt: z.string().optional(),
  createdAt: z.string(),
});
export type Volume = z.infer<typeof volumeSchema>;

export const volumeListSchema = z.array(volumeSchema);

export const volumeIdParams = z.object({ id: z.string().min(1).max(64) });

/** The answer of attaching a volume to an app, or detaching it. */
export const volumeAttachmentSchema = z.object({
  appName: z.string(),
  volumeName: z.string(),
  mountPath: z.string(),
});
export type VolumeAttachment = z.infer<typeof volumeAttachmentSchema>;
