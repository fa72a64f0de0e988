/**
 * Validation at the edge with zod (DESIGN 3.2): the route's schema checks params, query
 * and body, and every problem of a part comes back at once as a 400 with `issues`.
 * Answers are written with plain JSON.stringify: response schemas are for the OpenAPI
 * document, not re-checked on every answer.
 */
import type { FastifyInstance } from 'fastify';
import type { z } from 'zod';
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

export function installValidation(app: FastifyInstance): void {
  app.setValidatorCompiler<z.ZodType>(({ schema }) => (data: unknown) => {
    // reportInput lets a missing field be told from a wrong one; inputs are never echoed.
    const result = schema.safeParse(data, { reportInput: true });
    if (result.success) return { value: result.data };
    return { error: new RequestValidationError(toIssues(result.error.issues)) };
  });
  app.setSerializerCompiler(() => (data) => JSON.stringify(data));
}
