/**
 * The operator API (CONTRACT 2; spec 1, 2.9): organizations, their people, suspension,
 * limits, credit grants (`grantBody` in billing.ts), and the hosts of the platform.
 */
import { z } from 'zod';
import { createdKeySchema } from './tokens.js';

export const orgSchema = z.object({
  id: z.string(),
  name: z.string(),
  region: z.string(),
  prepaid: z.boolean(),
  managedBy: z.string().optional(),
  suspended: z.boolean(),
  suspendedAt: z.string().optional(),
  limits: z.object({
    apps: z.number().nullable(),
    computers: z.number().nullable(),
    databases: z.number().nullable(),
    machines: z.number().nullable(),
    memoryMb: z.number().nullable(),
    storageGb: z.number().nullable(),
  }),
  createdAt: z.string(),
});
export type Org = z.infer<typeof orgSchema>;

export const orgListSchema = z.array(orgSchema);

export const USER_ROLES = ['admin', 'member'] as const;

export const userSchema = z.object({
  id: z.string(),
  orgId: z.string(),
  email: z.string(),
  role: z.enum(USER_ROLES),
  createdAt: z.string(),
});
export type User = z.infer<typeof userSchema>;

export const createOrgBody = z.strictObject({
  name: z.string().min(1).max(120),
  region: z
    .string()
    .min(2)
    .max(12)
    .regex(/^[a-z0-9-]+$/, 'lowercase letters, digits, hyphens')
    .optional(),
  prepaid: z.boolean().default(true),
  grantCents: z.number().int().min(0).max(1e12).default(0),
  managedBy: z.string().min(1).max(64).optional(),
  /** pier: the first person's email and console password (both optional). */
  email: z.email().max(254).optional(),
  password: z.string().min(12).max(1024).optional(),
});
export type CreateOrgBody = z.output<typeof createOrgBody>;

export const createUserBody = z.strictObject({
  email: z.email().max(254),
  password: z.string().min(12).max(1024).optional(),
  role: z.enum(USER_ROLES).default('member'),
});
export type CreateUserBody = z.output<typeof createUserBody>;

/** A limit: an integer ≥ 0, or null for unlimited; an absent one stays as it is. */
const limit = (max: number) => z.number().int().min(0).max(max).nullable().optional();

export const limitsBody = z.strictObject({
  apps: limit(1_000_000),
  computers: limit(1_000_000),
  /** Managed databases, copies included (services/org-limits.ts says what counts). */
  databases: limit(1_000_000),
  /** Machines not destroyed. */
  machines: limit(1_000_000),
  /** Total memory of machines and databases, in MB. */
  memoryMb: limit(1_000_000_000),
  /** Reserved storage of volumes and databases, in GB. */
  storageGb: limit(1_000_000_000),
});
export type LimitsBody = z.output<typeof limitsBody>;

export const orgIdParams = z.object({ id: z.string().max(64) });

/** The creation answer: the organization, its first admin and a full-access key (once). */
export const createdOrgSchema = z.object({
  org: orgSchema,
  user: userSchema,
  token: z.string(),
  key: createdKeySchema,
});
export type CreatedOrg = z.infer<typeof createdOrgSchema>;

export const createdUserSchema = z.object({
  user: userSchema,
  token: z.string(),
  key: createdKeySchema,
});
export type CreatedUser = z.infer<typeof createdUserSchema>;

/** A host, its storage pool and capacity, and what runs on it. */
export const hostSchema = z.object({
  id: z.string(),
  region: z.string(),
  cpus: z.number(),
  memoryBytes: z.number(),
  pool: z.object({
    kind: z.string(),
    totalBytes: z.number(),
    usedBytes: z.number(),
    freeBytes: z.number(),
    reason: z.string(),
  }),
  objectStore: z.string(),
  running: z.object({
    databases: z.number(),
    machines: z.number(),
    volumes: z.number(),
    buckets: z.number(),
  }),
});
export type Host = z.infer<typeof hostSchema>;

export const hostListSchema = z.array(hostSchema);
