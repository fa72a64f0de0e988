/**
 * CORS rules of a bucket (spec 2.7, 4.5), in S3's model: the first rule whose origin,
 * method and requested headers all match answers a browser's request. Rules that can
 * never match are kept but named in `warnings`, so a mistake is visible at once.
 */
import { z } from 'zod';
import type { CorsRule } from '../../store/schema.js';
import { findBucket } from './buckets.js';
import type { ServiceContext } from '../context.js';

export const CORS_METHODS = ['GET', 'PUT', 'POST', 'DELETE', 'HEAD'] as const;

const wildcardOrigin = z
  .string()
  .min(1)
  .max(256)
  .refine((o) => (o.match(/\*/g) ?? []).length <= 1, 'at most one * per origin');

export const corsRuleSchema = z.strictObject({
  id: z.string().min(1).max(255).optional(),
  allowedMethods: z.array(z.enum(CORS_METHODS)).max(5),
  allowedOrigins: z.array(wildcardOrigin).max(100),
  allowedHeaders: z.array(z.string().min(1).max(256)).max(100).optional(),
  exposeHeaders: z.array(z.string().min(1).max(256)).max(100).optional(),
  maxAgeSeconds: z.number().int().min(0).max(86_400).optional(),
});

export const putCorsBody = z.strictObject({ rules: z.array(corsRuleSchema).max(100) });

export const corsSchema = z.object({
  rules: z.array(corsRuleSchema),
  warnings: z.array(z.string()).optional(),
});

function globToRegex(pattern: string): RegExp {
  const escaped = pattern
    .toLowerCase()
    .replace(/[.+?^${}()|[\]\\]/g, '\\$&')
    .replace('*', '.*');
  return new RegExp(`^${escaped}$`);
}

/** Sentences naming the rules that cannot match any browser request, or are shadowed. */
export function corsWarnings(rules: CorsRule[]): string[] {
  const warnings: string[] = [];
  rules.forEach((r, i) => {
    const name = `rule ${i + 1}${r.id ? ` (${r.id})` : ''}`;
    if (r.allowedMethods.length === 0)
      warnings.push(`${name} allows no method, so it never matches.`);
    if (r.allowedOrigins.length === 0)
      warnings.push(`${name} allows no origin, so it never matches.`);
    for (const o of r.allowedOrigins) {
      if (o !== '*' && !/^[a-z][a-z0-9+.-]*:\/\//i.test(o.replace('*', 'x'))) {
        warnings.push(
          `${name}: the origin '${o}' has no scheme (like https://), so no browser sends it.`,
        );
      } else if (/^[a-z][a-z0-9+.-]*:\/\/[^/]+\/./i.test(o)) {
        warnings.push(`${name}: the origin '${o}' has a path; browsers send origins without one.`);
      }
    }
    const earlier = rules
      .slice(0, i)
      .find(
        (e) =>
          e.allowedOrigins.includes('*') &&
          r.allowedMethods.every((m) => e.allowedMethods.includes(m)) &&
          (e.allowedHeaders ?? []).includes('*'),
      );
    if (earlier && r.allowedMethods.length > 0) {
      warnings.push(`${name} is shadowed by an earlier rule that allows every origin and header.`);
    }
  });
  return warnings;
}

export async function getCors(ctx: ServiceContext, orgId: string, bucketName: string) {
  const bucket = await findBucket(ctx.db, orgId, bucketName);
  const row = await ctx.db
    .selectFrom('buckets')
    .select('cors')
    .where('id', '=', bucket.id)
    .executeTakeFirstOrThrow();
  const warnings = corsWarnings(row.cors);
  return { rules: row.cors, ...(warnings.length ? { warnings } : {}) };
}

export async function putCors(
  ctx: ServiceContext,
  orgId: string,
  bucketName: string,
  rules: CorsRule[],
) {
  const bucket = await findBucket(ctx.db, orgId, bucketName);
  await ctx.db
    .updateTable('buckets')
    .set({ cors: JSON.stringify(rules) })
    .where('id', '=', bucket.id)
    .execute();
  const warnings = corsWarnings(rules);
  return { rules, ...(warnings.length ? { warnings } : {}) };
}

export interface CorsMatch {
  origin: string;
  rule: CorsRule;
}

/** The first rule that lets `origin` use `method` with `headers` (lowercased names). */
export function matchCors(
  rules: CorsRule[],
  origin: string,
  method: string,
  headers: string[],
): CorsMatch | undefined {
  const o = origin.toLowerCase();
  for (const rule of rules) {
    if (!rule.allowedMethods.includes(method as CorsRule['allowedMethods'][number])) continue;
    if (!rule.allowedOrigins.some((p) => p === '*' || globToRegex(p).test(o))) continue;
    const allowed = (rule.allowedHeaders ?? []).map((h) => globToRegex(h));
    if (!headers.every((h) => allowed.some((rx) => rx.test(h)))) continue;
    return { origin, rule };
  }
  return undefined;
}
