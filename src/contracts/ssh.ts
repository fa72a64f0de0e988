/**
 * SSH access (spec 4.1 SSH keys and SSH tokens): the organization's public keys,
 * short-lived SSH tokens for one app (or one machine of it), and the gateway's address.
 */
import { z } from 'zod';

export const addSshKeyBody = z.strictObject({
  publicKey: z.string().min(1).max(16384),
  name: z.string().min(1).max(100).optional(),
});
export type AddSshKeyBody = z.output<typeof addSshKeyBody>;

export const createSshTokenBody = z.strictObject({
  app: z.string().min(1).max(63),
  machine: z.string().min(1).max(64).optional(),
  ttlS: z.number().int().min(60).max(259_200).optional(),
});
export type CreateSshTokenBody = z.output<typeof createSshTokenBody>;

export const sshKeySchema = z.object({
  id: z.string(),
  name: z.string(),
  type: z.string(),
  bits: z.number(),
  fingerprint: z.string(),
  publicKey: z.string(),
  userId: z.string().optional(),
  createdAt: z.string(),
});
export type SshKey = z.infer<typeof sshKeySchema>;

export const sshKeyListSchema = z.array(sshKeySchema);

export const sshTokenSchema = z.object({
  id: z.string(),
  app: z.string(),
  machine: z.string().optional(),
  prefix: z.string(),
  expiresAt: z.string(),
  expired: z.boolean(),
  createdAt: z.string(),
});
export type SshToken = z.infer<typeof sshTokenSchema>;

export const sshTokenListSchema = z.array(sshTokenSchema);

/** The minting answer: the token (once) and how to reach the gateway with it. */
export const createdSshTokenSchema = sshTokenSchema.extend({
  token: z.string(),
  host: z.string(),
  port: z.number(),
  hostKey: z.string(),
  command: z.string(),
});
export type CreatedSshToken = z.infer<typeof createdSshTokenSchema>;

/** `GET /v1/ssh`: the gateway's address and host key. */
export const sshGatewaySchema = z.object({
  address: z.string(),
  host: z.string(),
  port: z.number(),
  hostKey: z.string(),
  hostKeyFingerprint: z.string(),
});
export type SshGatewayAnswer = z.infer<typeof sshGatewaySchema>;

export const sshIdParams = z.object({ id: z.string().max(64) });
