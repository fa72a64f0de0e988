/**
 * Validation at the edge with zod (DESIGN 3.2): the route's schema checks params, query
 * and body, and every problem of a part comes back at once as a 400 with `issues`.
 * Answers are written with plain JSON.stringify: response schemas are for the OpenAPI
 * document, not re-checked on every answer.
 *
 * Text PostgreSQL cannot store (NUL, lone surrogates) is refused here for every string and
 * key of every part, with or without a schema, so no route's schema has to remember it and
 * no such string reaches a query (where it was a 500).
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { z } from 'zod';
import { unstorableText } from '../../contracts/common.js';
import type { ValidationIssue } from '../../errors/api-error.js';

export class RequestValidationError extends Error {
  constructor(readonly issues: ValidationIssue[]) {
    super('request validation failed');
  }
}

/** Turns zod issues into spec issues: dotted paths, one entry per problem. */
export function toIssues(issues: z.core.$ZodIssue[]): ValidationIssue[] {
  return issues.flatMap((i) => {
    const path = i.path.map(String);
    // One entry per unknown field, at the field's own path, so clients can point at it.
    if (i.code === 'unrecognized_keys') {
      return i.keys.map((k) => ({ path: [...path, k].join('.'), message: 'unknown field' }));
    }
    const message = i.code === 'invalid_type' && i.input === undefined ? 'is required' : i.message;
    return [{ path: path.join('.'), message }];
  });
}

/** One issue per string or object key, at any depth, that PostgreSQL text cannot hold. */
export function textIssues(value: unknown, path: string[] = []): ValidationIssue[] {
  if (typeof value === 'string') {
    const why = unstorableText(value);
    return why ? [{ path: path.join('.'), message: why }] : [];
  }
  // Buffers and streams (raw bodies) are bytes, not text: their routes decide.
  if (value === null || typeof value !== 'object' || isBytes(value)) return [];
  const issues: ValidationIssue[] = [];
  for (const [key, inner] of Object.entries(value)) {
    const why = unstorableText(key);
    if (why) issues.push({ path: [...path, key].join('.'), message: `the field name ${why}` });
    else issues.push(...textIssues(inner, [...path, key]));
  }
  return issues;
}

function isBytes(value: object): boolean {
  return ArrayBuffer.isView(value) || typeof (value as { pipe?: unknown }).pipe === 'function';
}

const PARTS = [
  ['body', 'body'],
  ['querystring', 'query'],
  ['params', 'params'],
] as const;

/**
 * Refuses unstorable text before anything reads the request: the agent judge and its audit
 * run in this same stage and write names from the raw body. When it refuses, the schemas'
 * own issues come in the same answer, so every problem is still reported at once.
 */
function refuseUnstorableText(req: FastifyRequest): void {
  const text = PARTS.flatMap(([, field]) => textIssues(req[field]));
  if (text.length === 0) return;
  const schema = req.routeOptions.schema ?? {};
  const others = PARTS.flatMap(([part, field]) => {
    const zod = schema[part] as z.ZodType | undefined;
    const result = zod?.safeParse?.(req[field], { reportInput: true });
    return result && !result.success ? toIssues(result.error.issues) : [];
  });
  throw new RequestValidationError([...text, ...others]);
}

export function installValidation(app: FastifyInstance): void {
  app.setValidatorCompiler<z.ZodType>(({ schema }) => (data: unknown) => {
    // reportInput lets a missing field be told from a wrong one; inputs are never echoed.
    const result = schema.safeParse(data, { reportInput: true });
    if (result.success) return { value: result.data };
    return { error: new RequestValidationError(toIssues(result.error.issues)) };
  });
  // The first preValidation hook of every route: the agent judge's hook comes after it.
  app.addHook('preValidation', async (req) => refuseUnstorableText(req));
  app.setSerializerCompiler(() => (data) => JSON.stringify(data));
}
