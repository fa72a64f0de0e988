/**
 * Validation at the edge with zod (DESIGN 3.2): the route's schema checks params, query
 * and body, and every problem of a part comes back at once as a 400 with `issues`.
 * Answers are written with plain JSON.stringify: response schemas are for the OpenAPI
 * document, not re-checked on every answer.
 *
 * Text PostgreSQL cannot store (NUL, lone surrogates) and input nested deeper than any
 * route takes are refused here for every string and key of every part, with or without a
 * schema, so no route's schema has to remember it, no such string reaches a query (where
 * it was a 500) and no validator recurses through a body built to exhaust the stack.
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

/** Deeper JSON than any route takes; walking (or validating) it could exhaust the stack. */
export const MAX_INPUT_DEPTH = 32;

/**
 * One issue per string or object key, at any depth, that PostgreSQL text cannot hold, and
 * one for input nested deeper than MAX_INPUT_DEPTH. A loop, not recursion, so that a body
 * of a million `[` costs a loop and not the stack.
 */
export function inputIssues(value: unknown): ValidationIssue[] {
  const issues: ValidationIssue[] = [];
  // `badKey`: the field name itself is the problem (its value is not looked at).
  const unvisited: { value: unknown; path: string[]; badKey?: string }[] = [{ value, path: [] }];
  for (let next = unvisited.pop(); next; next = unvisited.pop()) {
    const { value: v, path, badKey } = next;
    if (badKey) {
      issues.push({ path: path.join('.'), message: `the field name ${badKey}` });
      continue;
    }
    if (typeof v === 'string') {
      const why = unstorableText(v);
      if (why) issues.push({ path: path.join('.'), message: why });
      continue;
    }
    // Buffers and streams (raw bodies) are bytes, not text: their routes decide.
    if (v === null || typeof v !== 'object' || isBytes(v)) continue;
    if (path.length >= MAX_INPUT_DEPTH) {
      issues.push({
        path: path.join('.'),
        message: `nested deeper than ${MAX_INPUT_DEPTH} levels`,
      });
      continue;
    }
    // Pushed last to first, so the issues come out in the order of the input.
    for (const [key, inner] of Object.entries(v).reverse()) {
      unvisited.push({ value: inner, path: [...path, key], badKey: unstorableText(key) });
    }
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
function refuseUnsafeInput(req: FastifyRequest): void {
  const schema = req.routeOptions.schema ?? {};
  const found = PARTS.map(([part, field]) => ({
    part,
    value: req[field],
    issues: inputIssues(req[field]),
  }));
  if (found.every((f) => f.issues.length === 0)) return;
  const others = found.flatMap(({ part, value, issues }) => {
    // Too deep for the schema to walk safely: the depth issue says enough.
    if (issues.some((i) => i.message.startsWith('nested deeper'))) return [];
    const result = (schema[part] as z.ZodType | undefined)?.safeParse?.(value, {
      reportInput: true,
    });
    return result && !result.success ? toIssues(result.error.issues) : [];
  });
  throw new RequestValidationError([...found.flatMap((f) => f.issues), ...others]);
}

export function installValidation(app: FastifyInstance): void {
  app.setValidatorCompiler<z.ZodType>(({ schema }) => (data: unknown) => {
    // reportInput lets a missing field be told from a wrong one; inputs are never echoed.
    const result = schema.safeParse(data, { reportInput: true });
    if (result.success) return { value: result.data };
    return { error: new RequestValidationError(toIssues(result.error.issues)) };
  });
  // The first preValidation hook of every route: the agent judge's hook comes after it.
  app.addHook('preValidation', async (req) => refuseUnsafeInput(req));
  app.setSerializerCompiler(() => (data) => JSON.stringify(data));
}
