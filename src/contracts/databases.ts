/**
 * Databases (spec 2.4 SuspendPolicy, 2.5 database, 4.3 databases, 8 limits): request
 * bodies and the database record, as zod schemas: the same schema validates at the edge,
 * types the services and feeds the OpenAPI document. Rules that tie fields together are
 * checked in `superRefine`, as the other families do. Also the attachment of a database
 * to an app (CONTRACT 3).
 */
import { z } from 'zod';
import { expiryNotTwice, resourceNameSchema, timestampSchema as timestamp } from './common.js';

export const databaseNameSchema = resourceNameSchema;

/** Seconds a copy lives from now (spec 8: copy `ttlSeconds`). */
const ttlSeconds = z.number().int().min(60).max(2_592_000);

/** Spec 2.4; defaults are filled in by the service, so answers always carry mode and idleSeconds. */
export const suspendPolicySchema = z
  .strictObject({
    mode: z.enum(['suspend', 'stop', 'off']).optional(),
    idleSeconds: z.number().int().min(10).max(86_400).optional(),
    stopAfterSeconds: z.number().int().min(10).max(604_800).optional(),
  })
  .superRefine((p, ctx) => {
    if (p.stopAfterSeconds === undefined) return;
    if ((p.mode ?? 'suspend') !== 'suspend') {
      ctx.addIssue({
        code: 'custom',
        path: ['stopAfterSeconds'],
        message: 'only with mode suspend',
      });
    }
    if (p.stopAfterSeconds <= (p.idleSeconds ?? 300)) {
      ctx.addIssue({
        code: 'custom',
        path: ['stopAfterSeconds'],
        message: 'must be greater than idleSeconds',
      });
    }
  });
export type SuspendPolicyInput = z.infer<typeof suspendPolicySchema>;

/** ICU locale names: a language, then region, script or variant subtags (`de-DE`, `sr-Latn-RS`). */
export const localeSchema = z
  .string()
  .min(1)
  .max(64)
  .regex(/^[A-Za-z]{2,8}([-_][A-Za-z0-9]{1,8})*$/, 'must be an ICU locale such as en-US');

export const createResourceBody = z
  .strictObject({
    name: databaseNameSchema,
    kind: z.enum(['postgres', 'redis']),
    memoryMb: z.number().int().min(128).max(16_384).optional(),
    persistent: z.boolean().optional(),
    sizeGb: z.number().int().min(1).max(500).optional(),
    flushIntervalS: z.number().int().min(15).max(86_400).optional(),
    durability: z.enum(['standard', 'host-redundant', 'zone-redundant']).optional(),
    locale: localeSchema.optional(),
    suspendPolicy: suspendPolicySchema.optional(),
  })
  .superRefine((b, ctx) => {
    const issue = (path: string, message: string) =>
      ctx.addIssue({ code: 'custom', path: [path], message });
    if (b.durability === 'zone-redundant') {
      issue(
        'durability',
        'zone-redundant is not offered: this installation has a single zone. Use host-redundant for a standby on a second instance.',
      );
    }
    if (b.kind === 'redis') {
      if (b.durability && b.durability !== 'standard') issue('durability', 'postgres only');
      if (b.locale !== undefined) issue('locale', 'postgres only');
    }
    if (b.kind === 'postgres' && b.persistent === false) {
      issue('persistent', 'postgres databases always keep their data on a volume');
    }
  });
export type CreateResourceBody = z.infer<typeof createResourceBody>;

export const updateResourceBody = z
  .strictObject({
    suspendPolicy: suspendPolicySchema.optional(),
    expiresAt: timestamp.nullable().optional(),
    ttlSeconds: ttlSeconds.optional(),
  })
  .superRefine((b, ctx) => {
    expiryNotTwice(b, ctx);
  });
export type UpdateResourceBody = z.infer<typeof updateResourceBody>;

const copyExpiry = {
  expiresAt: timestamp.optional(),
  ttlSeconds: ttlSeconds.optional(),
};

function noBothExpiries(b: { expiresAt?: string; ttlSeconds?: number }, ctx: z.RefinementCtx) {
  if (b.expiresAt !== undefined && b.ttlSeconds !== undefined) {
    ctx.addIssue({ code: 'custom', path: ['ttlSeconds'], message: 'not together with expiresAt' });
  }
}

export const branchBody = z
  .strictObject({ name: databaseNameSchema, ephemeral: z.boolean().optional(), ...copyExpiry })
  .superRefine(noBothExpiries);
export type BranchBody = z.infer<typeof branchBody>;

export const forkBody = z
  .strictObject({ name: databaseNameSchema, asOf: timestamp.optional(), ...copyExpiry })
  .superRefine(noBothExpiries);
export type ForkBody = z.infer<typeof forkBody>;

/**
 * Restore in place (pier's design after Neon's `preserve_under_name`): the database goes
 * back to `asOf`; its state just before is kept as a branch named `preserveUnderName`
 * (default `<name>-pre-restore-<unix seconds>`, cut to fit the name rules).
 */
export const restoreBody = z.strictObject({
  asOf: timestamp,
  preserveUnderName: databaseNameSchema.optional(),
});
export type RestoreBody = z.infer<typeof restoreBody>;

export const databaseSchema = z.object({
  name: z.string(),
  orgId: z.string(),
  kind: z.enum(['redis', 'postgres']),
  port: z.number(),
  secretKey: z.string(),
  durability: z.enum(['standard', 'host-redundant', 'zone-redundant']),
  primaryMachineId: z.string().optional(),
  createdAt: z.string(),
  state: z.enum(['restoring', 'ready', 'failed']),
  stateReason: z.string().optional(),
  sourceName: z.string().optional(),
  sourceAsOf: z.string().optional(),
  copyKind: z.enum(['fork', 'branch']).optional(),
  ephemeral: z.literal(true).optional(),
  ephemeralNote: z.string().optional(),
  suspendPolicy: z
    .object({
      mode: z.enum(['suspend', 'stop', 'off']),
      idleSeconds: z.number(),
      stopAfterSeconds: z.number().optional(),
    })
    .optional(),
  expiresAt: z.string().optional(),
  // pier's additions: the settings it was made with, and what the sleep policy did.
  memoryMb: z.number(),
  sizeGb: z.number(),
  persistent: z.boolean(),
  locale: z.string().optional(),
  host: z.string(),
  power: z.enum(['running', 'suspended', 'stopped']),
  standbyMachineId: z.string().optional(),
});
export type DatabaseRecord = z.infer<typeof databaseSchema>;

export const databaseListSchema = z.array(databaseSchema);

/** The creation answer: the record plus its URL, shown only here. */
export const createdDatabaseSchema = databaseSchema.extend({ url: z.string() });
export type CreatedDatabase = z.infer<typeof createdDatabaseSchema>;

/** The answer of a restore: the database, restoring, and where its old state is kept. */
export const restoringDatabaseSchema = databaseSchema.extend({ preservedUnderName: z.string() });
export type RestoringDatabase = z.infer<typeof restoringDatabaseSchema>;

/** The one-time answer of `POST /v1/resources/:name/url`. */
export const copyUrlSchema = z.object({ name: z.string(), url: z.string() });
export type CopyUrl = z.infer<typeof copyUrlSchema>;

export const databaseParams = z.object({ name: z.string().min(1).max(63) });

/** The answer of attaching a database to an app, or detaching it. */
export const databaseAttachmentSchema = z.object({
  appName: z.string(),
  databaseName: z.string(),
  injected: z.array(z.string()),
});
export type DatabaseAttachment = z.infer<typeof databaseAttachmentSchema>;
