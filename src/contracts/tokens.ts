/**
 * API keys and their scopes (spec 2.1 API key, 4.1 tokens, 5.3 scopes): the create body,
 * the key record (never its value) and the creation answer (the value, once).
 */
import { z } from 'zod';
import { expiryNotTwice, NAME_PATTERN } from './common.js';

const scopeDomain = /^(?=.{1,253}$)(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$/;

/** One scope: `read`, `deploy`, `deploy:<app>`, `mail:send` or `mail:send:<domain>`. */
export const scopeSchema = z
  .string()
  .refine(
    (s) =>
      s === 'read' ||
      s === 'deploy' ||
      s === 'mail:send' ||
      (s.startsWith('deploy:') && NAME_PATTERN.test(s.slice(7))) ||
      (s.startsWith('mail:send:') && scopeDomain.test(s.slice(10))),
    { message: 'must be read, deploy, deploy:<app>, mail:send or mail:send:<domain>' },
  );

export const AGENT_CLASSES = ['sandbox', 'twin', 'production'] as const;

export const createKeyBody = z
  .strictObject({
    name: z.string().min(1).max(120),
    scopes: z.array(scopeSchema).max(20).optional(),
    expiresAt: z.iso.datetime({ offset: true }).optional(),
    ttlSeconds: z.number().int().min(60).max(31_536_000).optional(),
    agent: z
      .strictObject({
        class: z.enum(AGENT_CLASSES),
        apps: z
          .array(z.string().regex(NAME_PATTERN, 'must be an app name'))
          .min(1)
          .max(50)
          .optional(),
        prodDataRead: z.boolean().optional(),
      })
      .optional(),
  })
  .superRefine((b, ctx) => {
    expiryNotTwice(b, ctx);
    if (b.agent?.prodDataRead !== undefined && b.agent.class !== 'production') {
      ctx.addIssue({
        code: 'custom',
        path: ['agent', 'prodDataRead'],
        message: 'only for agent class production',
      });
    }
  });
export type CreateKeyBody = z.infer<typeof createKeyBody>;

/** An agent token's block (spec 2.1). */
export const keyAgentSchema = z.object({
  class: z.enum(AGENT_CLASSES),
  apps: z.array(z.string()).optional(),
  prodDataRead: z.boolean().optional(),
});
export type KeyAgent = z.infer<typeof keyAgentSchema>;

export const keyRecordSchema = z.object({
  id: z.string(),
  orgId: z.string(),
  userId: z.string().optional(),
  name: z.string(),
  prefix: z.string(),
  createdAt: z.string(),
  lastUsedAt: z.string().optional(),
  scopes: z.array(z.string()).optional(),
  expiresAt: z.string().optional(),
  expired: z.boolean().optional(),
  agent: keyAgentSchema.optional(),
});
export type KeyRecord = z.infer<typeof keyRecordSchema>;

/** The creation answer: the record and the key itself, shown only here. */
export const createdKeySchema = keyRecordSchema.extend({ token: z.string() });
export type CreatedKey = z.infer<typeof createdKeySchema>;

export const keyListSchema = z.array(keyRecordSchema);

export const keyIdParams = z.object({ id: z.string().max(64) });
