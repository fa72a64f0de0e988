/**
 * One renderer for every failure (DESIGN 3.3): catalogue errors become `{error, code,
 * ...}` with their status; framework errors (bad JSON, too large, wrong method, unknown
 * route, a path parameter too long, headers too large) are mapped to catalogue codes, and
 * a 4xx the framework names but this file does not know gets the generic code of its
 * status; anything else is a 500 `internal` whose sentence carries a reference that is
 * also in the log line, and never a stack trace.
 */
import { randomBytes } from 'node:crypto';
import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ApiError, badRequest } from '../../errors/api-error.js';
import { genericCodeOf } from '../../errors/catalogue.js';
import { ObjectError } from '../../services/buckets/object-error.js';
import { objectErrorAsApiError } from './object-errors.js';
import { RequestValidationError } from './validation.js';

function send(reply: FastifyReply, err: ApiError): FastifyReply {
  if (err.retryAfter !== undefined) reply.header('retry-after', String(err.retryAfter));
  const body = err.toBody();
  // Every 400 lists its issues (spec 7), the specific codes too (`invalid-key`,
  // `name-reserved` …): one about the request as a whole where the thrower named none.
  if (err.status === 400 && body.issues === undefined)
    body.issues = [{ path: '', message: err.message }];
  return reply.code(err.status).type('application/json').send(body);
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
    case 'FST_ERR_BAD_URL':
    case 'FST_ERR_INVALID_URL':
      return badRequest([{ path: '', message: 'the path is not a valid URL' }]);
    case 'FST_ERR_MAX_PARAM_LENGTH':
      return new ApiError('uri-too-long', 'A part of the path is longer than 1024 characters.');
    case 'FST_ERR_ROUTE_MISSING_CONTENT_TYPE':
      return badRequest([{ path: '', message: 'the request has no Content-Type' }]);
    default:
      break;
  }
  // JSON.parse failures surface as a SyntaxError with status 400.
  if (err instanceof SyntaxError || err.code === 'FST_ERR_CTP_INVALID_JSON_BODY') {
    return badRequest([{ path: '', message: 'the body is not valid JSON' }]);
  }
  // PostgreSQL refusing text (NUL, bytes that are not UTF-8): the validation plugin refuses
  // such strings first; this is the last guard for text that reached a query another way.
  const sqlstate = (err as { code?: unknown }).code;
  if (sqlstate === '22021' || sqlstate === '22P05') {
    return badRequest([{ path: '', message: 'a text value holds a NUL or is not valid Unicode' }]);
  }
  // Any other refusal of the framework's (FST_* with a 4xx status): the status's generic
  // code, and a 400 says so in `issues` like every 400.
  const status = err.statusCode ?? 0;
  if (
    typeof err.code === 'string' &&
    err.code.startsWith('FST_') &&
    status >= 400 &&
    status < 500
  ) {
    if (status === 400) return badRequest([{ path: '', message: 'the request is malformed' }]);
    return new ApiError(genericCodeOf(status));
  }
  return undefined;
}

/**
 * What the HTTP parser refuses before Fastify sees a request (headers over 16 KB, a
 * request too slow to arrive, bytes that are not HTTP), in the same `{error, code}` form.
 */
export function answerClientError(err: NodeJS.ErrnoException, socket: Socket): void {
  // A reset connection has nobody left to answer.
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const answer =
    err.code === 'HPE_HEADER_OVERFLOW'
      ? new ApiError('headers-too-large', 'The request headers are larger than 16 KB.')
      : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? new ApiError('request-timeout')
        : badRequest([{ path: '', message: 'the request is not valid HTTP' }]);
  const body = JSON.stringify(answer.toBody());
  if (socket.writable) {
    socket.write(
      `HTTP/1.1 ${answer.status} ${STATUS_CODES[answer.status]}\r\n` +
        `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
        `Connection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy(err);
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

/** The renderer, for the error handler and for Fastify's `frameworkErrors`. */
export type ErrorRenderer = (err: FastifyError, req: FastifyRequest, reply: FastifyReply) => void;

export function installErrors(app: FastifyInstance): ErrorRenderer {
  const table = new RouteTable();
  app.addHook('onRoute', (route) => table.add(route.method, route.url));

  const noRoute = (req: FastifyRequest, reply: FastifyReply) => {
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
  };
  app.setNotFoundHandler(noRoute);

  const render: ErrorRenderer = (err, req, reply) => {
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
  };
  // No route takes this method and path: that is the answer, whatever the framework found
  // wrong with the body first (a QUERY without Content-Type, say).
  app.setErrorHandler((err: FastifyError, req, reply) =>
    req.is404 ? noRoute(req, reply) : render(err, req, reply),
  );
  // Fastify's `frameworkErrors` (a bad URL, a path parameter too long) come before routing.
  return render;
}
