/** An app's network policy (spec 4.6): bandwidth and new connections per minute. */
import { z } from 'zod';

/** Bounds of pier's choosing (spec 8 states only `reason`); docs/api.md lists them. */
export const MAX_BANDWIDTH_MBIT = 100_000;
export const MAX_NEW_CONNECTIONS_PER_MINUTE = 1_000_000;

export const putNetworkPolicyBody = z.strictObject({
  bandwidthMbit: z.number().int().min(1).max(MAX_BANDWIDTH_MBIT).nullable(),
  newConnectionsPerMinute: z.number().int().min(1).max(MAX_NEW_CONNECTIONS_PER_MINUTE).nullable(),
  reason: z.string().max(500).optional(),
});
export type PutNetworkPolicyBody = z.infer<typeof putNetworkPolicyBody>;

export const networkPolicySchema = z.object({
  appName: z.string(),
  bandwidthMbit: z.number().int().nullable(),
  newConnectionsPerMinute: z.number().int().nullable(),
  reason: z.string().optional(),
  updatedAt: z.string().optional(),
  /** Machines the policy was applied to by this change (PUT only). */
  appliedTo: z.array(z.string()).optional(),
});
export type NetworkPolicy = z.infer<typeof networkPolicySchema>;

export const policyParams = z.object({ name: z.string().max(63) });
