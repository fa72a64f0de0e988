/**
 * Browser CORS at the gateway, by the bucket's rules (spec 4.5): preflight requests are
 * answered from the first matching rule, and actual requests from an allowed origin get
 * the Access-Control headers browsers need to read the answer.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { corsRulesOf, matchCors } from '../../services/buckets/cors.js';
import type { ServiceContext } from '../../services/context.js';
import { ObjectError } from '../../services/buckets/object-error.js';

function requestedHeaders(req: FastifyRequest): string[] {
  const h = req.headers['access-control-request-headers'];
  if (typeof h !== 'string') return [];
  return h
    .split(',')
    .map((s) => s.trim().toLowerCase())
    .filter(Boolean);
}

/** OPTIONS: 200 with the rule's grants, or 403 when no rule allows the request. */
export async function handlePreflight(
  ctx: ServiceContext,
  req: FastifyRequest,
  reply: FastifyReply,
  bucket: string | undefined,
) {
  const origin = req.headers.origin;
  const method = req.headers['access-control-request-method'];
  if (typeof origin !== 'string' || typeof method !== 'string') {
    throw new ObjectError(
      'InvalidRequest',
      'Insufficient information. Origin request header needed.',
    );
  }
  const headers = requestedHeaders(req);
  const match = bucket
    ? matchCors(await corsRulesOf(ctx, bucket), origin, method, headers)
    : undefined;
  if (!match)
    throw new ObjectError('AccessDenied', 'CORSResponse: This CORS request is not allowed.');
  const wildcard = match.rule.allowedOrigins.includes('*');
  reply.header('access-control-allow-origin', wildcard ? '*' : origin);
  reply.header('access-control-allow-methods', match.rule.allowedMethods.join(', '));
  if (headers.length) reply.header('access-control-allow-headers', headers.join(', '));
  if (match.rule.exposeHeaders?.length)
    reply.header('access-control-expose-headers', match.rule.exposeHeaders.join(', '));
  if (match.rule.maxAgeSeconds !== undefined)
    reply.header('access-control-max-age', String(match.rule.maxAgeSeconds));
  reply.header('vary', 'Origin, Access-Control-Request-Headers, Access-Control-Request-Method');
  return reply.code(200).send();
}

/** Adds the Access-Control headers of an actual request from an allowed origin. */
export async function decorateActual(
  ctx: ServiceContext,
  req: FastifyRequest,
  reply: FastifyReply,
  bucket: string | undefined,
) {
  const origin = req.headers.origin;
  if (typeof origin !== 'string' || !bucket) return;
  const match = matchCors(await corsRulesOf(ctx, bucket), origin, req.method, []);
  if (!match) return;
  reply.header(
    'access-control-allow-origin',
    match.rule.allowedOrigins.includes('*') ? '*' : origin,
  );
  if (match.rule.exposeHeaders?.length)
    reply.header('access-control-expose-headers', match.rule.exposeHeaders.join(', '));
  reply.header('vary', 'Origin');
}
