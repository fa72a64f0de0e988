/**
 * Preview environments (issue #26 item 3; a family the spec names but does not show):
 * `<app>--<preview>`, an app of its own made from an app. docs/api.md ("Previews")
 * describes the design.
 */
import { z } from 'zod';
import { NAME_PATTERN, timestampSchema } from './common.js';

/** A preview lives this long unless the request says otherwise. */
export const PREVIEW_DEFAULT_TTL_S = 7 * 24 * 3600;
/** The bounds of a requested lifetime: an hour to 30 days. */
export const PREVIEW_MIN_TTL_S = 3600;
export const PREVIEW_MAX_TTL_S = 30 * 24 * 3600;

/** The separator of `<app>--<preview>`. */
export const PREVIEW_SEPARATOR = '--';

/** A DNS label; `<app>--<name>` must also fit the 63 characters of an app name. */
export const previewNameSchema = z
  .string()
  .min(1)
  .max(60)
  .regex(
    NAME_PATTERN,
    'lowercase letters, digits and hyphens, starting and ending with a letter or digit',
  );

export const createPreviewBody = z.strictObject({
  name: previewNameSchema,
  /** Lifetime from now (default 7 days); not with `expiresAt`. */
  ttlSeconds: z.number().int().min(PREVIEW_MIN_TTL_S).max(PREVIEW_MAX_TTL_S).optional(),
  /** The moment it is removed, within the same bounds; not with `ttlSeconds`. */
  expiresAt: timestampSchema.optional(),
});
export type CreatePreviewBody = z.infer<typeof createPreviewBody>;

export const PREVIEW_STATES = ['creating', 'ready', 'failed'] as const;

export const previewSchema = z.object({
  id: z.string(),
  /** The preview's own name (unique per app). */
  name: z.string(),
  /** The app it previews. */
  app: z.string(),
  /** The app it made: `<app>--<name>`. */
  appName: z.string(),
  state: z.enum(PREVIEW_STATES),
  /** Why it failed (state `failed`), or what it waits for (state `creating`). */
  stateReason: z.string().optional(),
  /** The preview app's own address. */
  defaultAddress: z.string(),
  /** The app's release the preview runs (its version), if the app had a live one. */
  release: z.number().optional(),
  /** The preview app's deploy of that release, once made. */
  deploy: z.string().optional(),
  /** Each database attached to the app, and the preview's branch of it, attached instead. */
  databases: z.array(z.object({ source: z.string(), branch: z.string() })),
  /** The buckets attached to the app, attached to the preview read-only. */
  buckets: z.array(z.string()),
  /** The Git branch it follows, when a push made it. */
  gitBranch: z.string().optional(),
  expiresAt: z.string(),
  createdAt: z.string(),
});
export type Preview = z.infer<typeof previewSchema>;
export const previewListSchema = z.array(previewSchema);

export const previewParams = z.object({
  name: z.string().max(63),
  preview: z.string().max(63),
});
