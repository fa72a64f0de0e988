/**
 * App protection (spec 4.6, 5.10): public, password, or signed links and access tokens.
 * The body of `PUT …/protection` and the state's fields are pier's design (the spec does
 * not show them); docs/api.md describes them.
 */
import { z } from 'zod';
import { timestampSchema } from './common.js';

/** The request header that carries an access token to a protected app. */
export const ACCESS_TOKEN_HEADER = 'Pier-Access-Token';

/** The shortest password an app may be protected with (guesses are limited too). */
export const PROTECTION_PASSWORD_MIN = 12;

export const protectionModeSchema = z.enum(['public', 'password', 'signed']);
export type ProtectionMode = z.infer<typeof protectionModeSchema>;

export const setProtectionBody = z.strictObject({
  mode: protectionModeSchema,
  /**
   * Password mode only; when absent, pier generates one and answers it once. At least
   * `PROTECTION_PASSWORD_MIN` characters, like the console's own passwords (docs/api.md).
   */
  password: z.string().min(PROTECTION_PASSWORD_MIN).max(256).optional(),
});
export type SetProtectionBody = z.infer<typeof setProtectionBody>;

export const protectionLinkSchema = z.object({
  id: z.string(),
  label: z.string(),
  expiresAt: z.string().optional(),
  createdAt: z.string(),
});
export type ProtectionLink = z.infer<typeof protectionLinkSchema>;

export const protectionSchema = z.object({
  appName: z.string(),
  mode: protectionModeSchema,
  /** Password mode: a password is set (it is never shown again). */
  passwordSet: z.boolean(),
  /** Answered once, when pier generated (or rotated) the password. */
  password: z.string().optional(),
  /** The header access tokens travel in. */
  header: z.string(),
  links: z.array(protectionLinkSchema),
  updatedAt: z.string().optional(),
});
export type Protection = z.infer<typeof protectionSchema>;

export const createLinkBody = z.strictObject({
  label: z.string().min(1).max(64),
  expiresAt: timestampSchema.optional(),
});
export type CreateLinkBody = z.infer<typeof createLinkBody>;

export const createdLinkSchema = protectionLinkSchema.extend({ url: z.string() });
export type CreatedLink = z.infer<typeof createdLinkSchema>;

/** Every field is optional, so the body may be left out altogether. */
export const createTokenBody = z
  .strictObject({
    ttlSeconds: z.number().int().min(1).max(86400).optional(),
    sub: z.string().min(1).max(256).optional(),
    next: z.string().max(512).optional(),
  })
  .nullish();
export type CreateTokenBody = NonNullable<z.infer<typeof createTokenBody>>;

export const accessTokenSchema = z.object({
  token: z.string(),
  expiresAt: z.string(),
  url: z.string(),
  header: z.string(),
});
export type AccessToken = z.infer<typeof accessTokenSchema>;

export const protectionParams = z.object({ name: z.string().max(63) });
export const linkParams = protectionParams.extend({ id: z.string().max(64) });
