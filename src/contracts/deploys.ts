/**
 * Deploys, releases and rollback (CONTRACT 7, spec part 3 and 7.4). A deploy rolls an
 * app to an image and a machine config; each deploy that goes live makes a release
 * (version 1, 2, … per app) recording the image digest, the config and the secret values
 * in force, which a rollback deploys again exactly.
 */
import { z } from 'zod';
import { classMatchesVcpus, machineConfigFields, machineConfigRecordSchema } from './machines.js';

const { image: _image, ...configFields } = machineConfigFields;

/** The machine config of spec 2.12 without `image` (the deploy names the image). */
export const deployConfigSchema = z.strictObject(configFields).superRefine(classMatchesVcpus);
export type DeployConfigInput = z.infer<typeof deployConfigSchema>;

export const DEPLOY_STRATEGIES = ['rolling', 'immediate'] as const;

export const createDeployBody = z.strictObject({
  /** An OCI reference, or `build:<id>` for a build of this app's organization. */
  image: z.string().min(1).max(512),
  config: deployConfigSchema.optional(),
  strategy: z.enum(DEPLOY_STRATEGIES).optional(),
});
export type CreateDeployBody = z.infer<typeof createDeployBody>;

export const DEPLOY_STATUSES = ['pending', 'running', 'done', 'error'] as const;
export type DeployStatus = (typeof DEPLOY_STATUSES)[number];

export const deploySchema = z.object({
  id: z.string(),
  app: z.string(),
  status: z.enum(DEPLOY_STATUSES),
  image: z.string(),
  strategy: z.enum(DEPLOY_STRATEGIES),
  /** The release this deploy goes to (its version), once it has one. */
  release: z.number().optional(),
  /** Set on a rollback: the version it deploys again. */
  rollbackOf: z.number().optional(),
  /** What the deploy is doing now, for people following it (`starting 1/2`, …). */
  step: z.string().optional(),
  createdAt: z.string(),
  finishedAt: z.string().optional(),
  error: z.string().optional(),
});
export type Deploy = z.infer<typeof deploySchema>;
export const deployListSchema = z.array(deploySchema);

export const RELEASE_STATUSES = ['live', 'superseded', 'failed'] as const;
export type ReleaseStatus = (typeof RELEASE_STATUSES)[number];

export const releaseSchema = z.object({
  version: z.number(),
  app: z.string(),
  image: z.string(),
  imageDigest: z.string(),
  build: z.string().optional(),
  config: machineConfigRecordSchema,
  status: z.enum(RELEASE_STATUSES),
  /** The deploy that made it. */
  deploy: z.string(),
  /** The names of the secrets it recorded (values are never returned). */
  secrets: z.array(z.string()),
  createdAt: z.string(),
  liveAt: z.string().optional(),
});
export type Release = z.infer<typeof releaseSchema>;
export const releaseListSchema = z.array(releaseSchema);

export const rollbackBody = z
  .strictObject({
    version: z.number().int().min(1).optional(),
  })
  // No body at all is a rollback to the release before (as `curl -X POST` sends it).
  .nullish();

export const deployIdParams = z.object({ id: z.string().min(1).max(64) });
