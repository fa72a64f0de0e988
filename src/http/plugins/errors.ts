/**
 * One renderer for every failure (DESIGN 3.3): catalogue errors become `{error, code,
 * ...}` with their status; framework errors (bad JSON, too large, wrong method, unknown
 * route) are mapped to catalogue codes; anything else is a 500 `internal` whose sentence
 * carries a reference that is also in the log line, and never a stack trace.
 */
import { randomBytes } from 'node:crypto';
import type { FastifyError, FastifyInstance, FastifyReply } from 'fastify';
import { ApiError, badRequest } from '../../errors/api-error.js';
import { ObjectError } from '../../services/buckets/object-error.js';
import { objectErrorAsApiError } from './object-errors.js';
import { RequestValidationError } from './validation.js';

function send(reply: FastifyReply, err: ApiError): FastifyReply {
  if (err.retryAfter !== undefined) reply.header('retry-after', String(err.retryAfter));
  return reply.code(err.status).type('application/json').send(err.toBody());
}

/** Maps Fastify's own errors (body parsing, limits) onto the catalogue. */
function fromFramework(err: FastifyError): ApiError | undefined {
  switch (err.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new ApiError('too-large', 'The body is larger than this route accepts.');
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new ApiError('unsupported-media-type', 'Send the body as application/json.');
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return badRequest([{ path: '', message: 'the body is empty but the content type is JSON' }]);
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return badRequest([{ path: '', message: 'Content-Length does not match the body' }]);
    default:
      break;
  }
  // JSON.parse failures surface as a SyntaxError with status 400.
  if (err instanceof SyntaxError || err.code === 'FST_ERR_CTP_INVALID_JSON_BODY') {
    return badRequest([{ path: '', message: 'the body is not valid JSON' }]);
  }
  return undefined;
}

/** Route patterns per method, so an unknown method on a known path answers 405. */
class RouteTable {
  private readonly routes: { method: string; pattern: RegExp }[] = [];

  add(method: string | string[], url: string): void {
    const rx = new RegExp(
      '^' +
        url
          .replace(/[.+?^${}()|[\]\\]/g, '\\$&')
          .replace(/:[^/]+/g, '[^/]+')
          .replace(/\*/g, '.*') +
        '$',
    );
    for (const m of Array.isArray(method) ? method : [method])
      this.routes.push({ method: m, pattern: rx });
  }

  allowed(path: string): string[] {
    return [...new Set(this.routes.filter((r) => r.pattern.test(path)).map((r) => r.method))];
  }
}

export function installErrors(app: FastifyInstance): void {
  const table = new RouteTable();
  app.addHook('onRoute', (route) => table.add(route.method, route.url));

  app.setNotFoundHandler((req, reply) => {
    const path = req.url.split('?')[0] ?? req.url;
    const allowed = table.allowed(path).filter((m) => m !== 'HEAD');
    if (allowed.length > 0) {
      reply.header('allow', allowed.join(', '));
      return send(
        reply,
        new ApiError(
          'method-not-allowed',
          `${req.method} is not allowed here; use ${allowed.join(', ')}.`,
        ),
      );
    }
    return send(reply, new ApiError('not-found', `No route ${req.method} ${path}.`));
  });

  app.setErrorHandler((err: FastifyError, req, reply) => {
    if (err instanceof ApiError) return send(reply, err);
    if (err instanceof RequestValidationError) return send(reply, badRequest(err.issues));
    if (err instanceof ObjectError) return send(reply, objectErrorAsApiError(err));
    const mapped = fromFramework(err);
    if (mapped) return send(reply, mapped);
    if (err.statusCode === 413) return send(reply, new ApiError('too-large'));
    const ref = `ref-${randomBytes(6).toString('hex')}`;
    req.log.error({ err, ref }, 'unexpected failure');
    return send(
      reply,
      new ApiError('internal', `The platform failed (reference ${ref}).`, { reference: ref }),
    );
  });
}
