/**
 * Device login (spec 2.2 device login, 4.1, 4.2 device code): the two entrances without a
 * key (code, token) and the console's side (lookup, approve).
 */
import { z } from 'zod';

export const deviceCodeBody = z
  .strictObject({
    client: z.string().min(1).max(120).optional(),
    version: z.string().min(1).max(40).optional(),
  })
  .default({});
export type DeviceCodeBody = z.output<typeof deviceCodeBody>;

/** A request without a body reaches validation as null: it asks with no client named. */
export const deviceCodeRequestBody = deviceCodeBody.nullish();

export const deviceTokenBody = z.strictObject({ deviceCode: z.string().min(1).max(200) });
export const deviceLookupBody = z.strictObject({ userCode: z.string().min(1).max(40) });
export const deviceApproveBody = z.strictObject({
  userCode: z.string().min(1).max(40),
  approve: z.boolean().default(true),
});
export type DeviceApproveBody = z.output<typeof deviceApproveBody>;

/** The answer of `POST /v1/device/code`. */
export const deviceCodeSchema = z.object({
  deviceCode: z.string(),
  userCode: z.string(),
  verificationUri: z.string(),
  verificationUriComplete: z.string(),
  expiresIn: z.number(),
  interval: z.number(),
});
export type DeviceCode = z.infer<typeof deviceCodeSchema>;

/** The answer of `POST /v1/device/token` once approved. */
export const deviceTokenSchema = z.object({
  token: z.string(),
  org: z.object({ id: z.string(), name: z.string() }),
});
export type DeviceToken = z.infer<typeof deviceTokenSchema>;

/** What a pending device login asks for. */
export const deviceLookupSchema = z.object({
  client: z.string().nullable(),
  version: z.string().nullable(),
  requestedFrom: z.string(),
  requestedAt: z.string(),
  expiresAt: z.string(),
});
export type DeviceLookup = z.infer<typeof deviceLookupSchema>;

export const deviceApprovedSchema = z.object({ ok: z.boolean(), approved: z.boolean() });
