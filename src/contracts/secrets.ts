/**
 * Per-app secrets (spec 2.8 secret, 4.10 secrets): names and metadata out, values in,
 * never back.
 */
import { z } from 'zod';

export const putSecretsBody = z.strictObject({
  secrets: z.record(z.string(), z.string()).optional(),
  staged: z.boolean().default(true),
  build: z.record(z.string(), z.boolean()).optional(),
});
export type PutSecretsBody = z.output<typeof putSecretsBody>;

export const secretSchema = z.object({
  name: z.string(),
  updatedAt: z.string(),
  managed: z.boolean(),
  managedReason: z.enum(['attachment', 'resource-password']).optional(),
  build: z.boolean().optional(),
});
export type Secret = z.infer<typeof secretSchema>;

export const secretListSchema = z.array(secretSchema);

/** The answer of `PUT /v1/apps/:name/secrets`. */
export const putSecretsAnswerSchema = z.object({
  appName: z.string(),
  staged: z.boolean(),
  changed: z.array(z.string()),
  /** Machines restarted to take the new values. */
  restarted: z.array(z.string()),
  secrets: z.array(secretSchema),
});
export type PutSecretsAnswer = z.infer<typeof putSecretsAnswerSchema>;

export const secretAppParams = z.object({ name: z.string().max(63) });
export const secretKeyParams = secretAppParams.extend({ key: z.string().max(256) });
