/**
 * The error answers and 204s of every operation, in the OpenAPI document: routes declare
 * their success answer, and this fills in what the platform's plugins may answer around
 * it, so a generated client knows every error is `{error, code}` and which statuses to
 * expect. Installed before @fastify/swagger, whose own onRoute hook then reads the result.
 *
 * - every route: 400 (validation: any part, including an unknown query parameter, may
 *   hold text PostgreSQL refuses), 500, and `default` (the route's own 409s, 503s …);
 * - a route behind a key: 401; one with an auth row (scopes, agent rules): 403; a write
 *   behind a key: 402 (credit at zero);
 * - a path with parameters: 404 (missing, or another organization's);
 * - a body: 413 and 415;
 * - a DELETE that declares no success answer answers 204 No Content (spec 3: deletes
 *   answer 204), and is documented so.
 */
import type { FastifyInstance, RouteOptions } from 'fastify';
import { jsonSchemaTransform } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { errorBodySchema } from '../../contracts/common.js';
import { errorCatalogue, genericCodeOf } from '../../errors/catalogue.js';

const noContent = z.null().describe('No content');
/** Routes that answer bytes, a redirect or a WebSocket: their summary says what. */
const anySuccess = z.unknown().describe('Success: see the summary');

function errorAnswer(status: number | 'default') {
  const meaning =
    status === 'default'
      ? 'Any other failure: `code` names it (spec 7).'
      : `\`${genericCodeOf(status)}\` or a more specific code: ${errorCatalogue[genericCodeOf(status)].message}`;
  return errorBodySchema.describe(meaning);
}

/** The error statuses this route can answer besides its own (see the header). */
export function errorStatusesOf(route: RouteOptions): number[] {
  const statuses = [400, 500];
  const guard = route.config?.auth;
  const keyed = guard !== undefined && guard !== 'public';
  const methods = Array.isArray(route.method) ? route.method : [route.method];
  if (keyed) statuses.push(401);
  if (keyed && typeof guard === 'object') {
    statuses.push(403);
    if (methods.some((m) => !['GET', 'HEAD', 'OPTIONS'].includes(m))) statuses.push(402);
  }
  if (route.url.includes(':')) statuses.push(404);
  if (route.schema?.body) statuses.push(413, 415);
  return statuses.sort();
}

export function installOpenApiAnswers(app: FastifyInstance): void {
  app.addHook('onRoute', (route) => {
    const schema = route.schema;
    if (!schema || schema.hide) return;
    const response: Record<string, unknown> = { ...(schema.response as object | undefined) };
    const succeeds = Object.keys(response).some((s) => /^[23]/.test(s));
    if (!succeeds)
      response[route.method === 'DELETE' ? 204 : 200] ??=
        route.method === 'DELETE' ? noContent : anySuccess;
    for (const status of errorStatusesOf(route)) response[status] ??= errorAnswer(status);
    response.default ??= errorAnswer('default');
    route.schema = { ...schema, response };
  });
}

/**
 * The zod transform of the document, with 204s written as swagger expects an answer
 * without a body (`type: 'null'`); zod's null would be documented as a JSON body.
 */
export const documentTransform: typeof jsonSchemaTransform = (input) => {
  const out = jsonSchemaTransform(input);
  const response = (out.schema as { response?: Record<string, unknown> }).response;
  if (response?.[204]) response[204] = { type: 'null', description: 'No content' };
  return out;
};
