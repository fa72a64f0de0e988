/**
 * Pieces every family shares (spec 2, 8): the names of the platform-wide namespace that
 * apps, databases, volumes and buckets share, and timestamps as request bodies take them.
 *
 * Files in `src/contracts/` import only `zod` and each other: the server validates and
 * documents with these schemas, the services are typed by them, and the CLI reads its
 * record types from them (type-only), so a field added to the API reaches all three.
 */
import { z } from 'zod';

/** 1–63 characters: lowercase letters, digits and hyphens, starting and ending alphanumeric. */
export const NAME_PATTERN = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;

/** A name of the shared namespace, as request bodies take it. */
export const resourceNameSchema = z
  .string()
  .min(1)
  .max(63)
  .regex(
    NAME_PATTERN,
    'lowercase letters, digits and hyphens, starting and ending with a letter or digit',
  );

/** An ISO 8601 moment with its offset (`2025-01-02T03:04:05Z`, `…+02:00`). */
export const timestampSchema = z.iso.datetime({ offset: true });

/** `expiresAt` and `ttlSeconds` say the same thing two ways: a body may give one of them. */
export function expiryNotTwice(
  b: { expiresAt?: unknown; ttlSeconds?: unknown },
  ctx: z.RefinementCtx,
): void {
  if (b.expiresAt !== undefined && b.ttlSeconds !== undefined) {
    ctx.addIssue({ code: 'custom', path: ['ttlSeconds'], message: 'not together with expiresAt' });
  }
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * Why a string cannot be stored as PostgreSQL text, or undefined if it can: PostgreSQL
 * refuses NUL in text, and a lone UTF-16 surrogate (which JSON's `\ud800` escape yields)
 * has no UTF-8 form, so the driver would store U+FFFD instead of what was sent. The
 * validation plugin asks this of every string and object key of every request part, so
 * no schema has to remember it.
 */
export function unstorableText(s: string): string | undefined {
  if (s.includes('\u0000')) return 'contains a NUL character';
  if (LONE_SURROGATE.test(s)) return 'contains a lone surrogate (not valid Unicode)';
  return undefined;
}

/** Every error answer (spec 7): a sentence, a catalogue code, and extras some codes add. */
export const errorBodySchema = z.looseObject({
  error: z.string(),
  code: z.string(),
  issues: z.array(z.object({ path: z.string(), message: z.string() })).optional(),
});
