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
export function toIssues(issues: z.core.$ZodIssue[], prefix = ''): ValidationIssue[] {
  return issues.map((i) => {
    const path = [prefix, ...i.path.map(String)].filter(Boolean).join('.');
    let message = i.message;
    if (i.code === 'unrecognized_keys') message = `unknown field(s): ${i.keys.join(', ')}`;
    if (i.code === 'invalid_type' && i.input === undefined) message = 'is required';
    return { path, message };
  });
}

export function installValidation(app: FastifyInstance): void {
  app.setValidatorCompiler<z.ZodType>(({ schema }) => (data: unknown) => {
    const result = schema.safeParse(data);
    if (result.success) return { value: result.data };
    return { error: new RequestValidationError(toIssues(result.error.issues)) };
  });
  app.setSerializerCompiler(() => (data) => JSON.stringify(data));
}
