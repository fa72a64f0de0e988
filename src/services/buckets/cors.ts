/**
 * CORS rules of a bucket (spec 2.7, 4.5), in S3's model: the first rule whose origin,
 * method and requested headers all match answers a browser's request. Rules that can
 * never match are kept but named in `warnings`, so a mistake is visible at once.
 */
import { sql } from 'kysely';
import type { Executor } from '../../store/db.js';
import type { CorsRule } from '../../store/schema.js';
import { INVALIDATION_CHANNEL } from '../authenticator.js';
import type { ServiceContext } from '../context.js';
import { CORS_KIND } from './caches.js';
import { findBucket } from './records.js';

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

/**
 * Replaces the rules of a bucket. They apply at once: on this replica from the next
 * request on, on the others when the NOTIFY sent with the change reaches them.
 */
export async function putCors(
  ctx: ServiceContext,
  orgId: string,
  bucketName: string,
  rules: CorsRule[],
) {
  const bucket = await ctx.db.transaction().execute(async (tx) => {
    const bucket = await findBucket(tx, orgId, bucketName);
    await tx
      .updateTable('buckets')
      .set({ cors: JSON.stringify(rules) })
      .where('id', '=', bucket.id)
      .execute();
    await announceCorsChanged(tx, ctx, bucket.name);
    return bucket;
  });
  // Dropped again now that the rules committed: a request that read the old ones between
  // the announcement and the commit must not keep them until the NOTIFY comes back.
  ctx.bucketCaches.corsRules.drop(bucket.name);
  const warnings = corsWarnings(rules);
  return { rules, ...(warnings.length ? { warnings } : {}) };
}

/**
 * Tells every replica that the rules of the bucket named `bucketName` changed: a NOTIFY in
 * the caller's transaction, heard by every replica when it commits, and this replica's
 * cache dropped at once.
 */
export async function announceCorsChanged(
  ex: Executor,
  ctx: ServiceContext,
  bucketName: string,
): Promise<void> {
  await sql`SELECT pg_notify(${INVALIDATION_CHANNEL}, ${`${CORS_KIND}:${bucketName}`})`.execute(ex);
  ctx.bucketCaches.corsRules.drop(bucketName);
}

/** The rules of the bucket named `bucketName` (`[]` when none, or no such bucket), cached. */
export async function corsRulesOf(ctx: ServiceContext, bucketName: string): Promise<CorsRule[]> {
  const rules = await ctx.bucketCaches.corsRules.get(bucketName, async () => {
    const row = await ctx.db
      .selectFrom('buckets')
      .select('cors')
      .where('name', '=', bucketName)
      .executeTakeFirst();
    return row?.cors ?? [];
  });
  return rules ?? [];
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
