/**
 * What logs may say about a request: its method and URL, with the values of query
 * parameters that carry secrets (presigned signatures, tokens, passwords, keys) replaced
 * by `[redacted]`; never its headers or its body. `redactingLogger` puts these rules on a
 * pino logger; the app's logger is made with it, so every request log line and every
 * error logged in a request goes through them.
 */
import type { IncomingMessage } from 'node:http';
import pino, { type Logger } from 'pino';

export const REDACTED = '[redacted]';

/** Query parameter names never logged with their value (compared case-insensitively). */
const SECRET_NAMES = new Set([
  'key',
  'apikey',
  'sig',
  'code',
  'auth',
  'authorization',
  'session',
  'sessionid',
  'jwt',
  'otp',
  'pass',
  'pwd',
]);
/**
 * Nor any name containing one of these: `X-Amz-Signature`, `X-Amz-Credential`,
 * `X-Amz-Security-Token`, `token`, `access_token`, `client_secret`, `password`, `api_key`…
 */
const SECRET_PARTS = /token|secret|passw|signature|credential|api[-_]?key|private[-_]?key/;

/** Whether a query parameter of this name (as it appears in the URL) carries a secret. */
export function isSecretParam(rawName: string): boolean {
  let name = rawName;
  if (/[%+]/.test(name)) {
    try {
      name = decodeURIComponent(name.replace(/\+/g, ' '));
    } catch {
      // a malformed escape: judge the name as written
    }
  }
  name = name.trim().toLowerCase();
  return SECRET_NAMES.has(name) || SECRET_PARTS.test(name);
}

/** `a=1&token=x` → `a=1&token=[redacted]`; separators and other parameters as they were. */
function redactParams(params: string): string {
  let changed = false;
  const parts = params.split('&').map((part) => {
    const eq = part.indexOf('=');
    if (eq < 0 || !isSecretParam(part.slice(0, eq))) return part;
    changed = true;
    return `${part.slice(0, eq)}=${REDACTED}`;
  });
  return changed ? parts.join('&') : params;
}

/**
 * A URL (absolute, or a request target like `/s3/b/k?X-Amz-Signature=…`) fit for a log:
 * the values of secret query parameters (and fragment parameters) are `[redacted]`, and
 * everything else is left exactly as it was.
 */
export function redactUrl(url: string): string {
  const q = url.indexOf('?');
  const h = url.indexOf('#');
  if (q < 0 && h < 0) return url;
  if (h >= 0 && (q < 0 || h < q)) {
    // No query before the fragment: only the fragment can hold parameters.
    return `${url.slice(0, h + 1)}${redactParams(url.slice(h + 1))}`;
  }
  const query = h < 0 ? url.slice(q + 1) : url.slice(q + 1, h);
  const fragment = h < 0 ? '' : `#${redactParams(url.slice(h + 1))}`;
  return `${url.slice(0, q + 1)}${redactParams(query)}${fragment}`;
}

/** Free text (an error's message or stack) with every URL parameter in it redacted. */
export function redactText(text: string): string {
  if (!/[?&#]/.test(text)) return text;
  return text.replace(/([?&#])([^=&?#\s"'<>]+)=([^&#\s"'<>]*)/g, (all, sep, name) =>
    isSecretParam(name) ? `${sep}${name}=${REDACTED}` : all,
  );
}

/**
 * Every string inside a serialized error (message, stack, causes, fields) through
 * `redactText`. Plain objects, arrays and pino's serialized errors (`errProto`) are
 * walked; buffers, dates and other instances are left as they were.
 */
function redactDeep(value: unknown, errProto: unknown, depth = 0): unknown {
  if (typeof value === 'string') return redactText(value);
  if (depth > 4 || value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) return value.map((v) => redactDeep(v, errProto, depth + 1));
  const proto = Object.getPrototypeOf(value) as unknown;
  if (proto !== Object.prototype && proto !== null && proto !== errProto) return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) out[k] = redactDeep(v, errProto, depth + 1);
  return out;
}

type LoggedRequest = Pick<IncomingMessage, 'method' | 'url'> & {
  headers?: IncomingMessage['headers'];
  host?: string;
  ip?: string;
  socket?: { remoteAddress?: string; remotePort?: number } | null;
};

/**
 * Fastify's request serializer with the URL redacted: method, URL, version, host and peer,
 * never headers (Authorization, Cookie, X-Amz-Security-Token) or the body.
 */
export function serializeRequest(req: LoggedRequest) {
  return {
    method: req.method,
    url: req.url === undefined ? undefined : redactUrl(req.url),
    version: req.headers?.['accept-version'],
    host: req.host ?? req.headers?.host,
    remoteAddress: req.ip ?? req.socket?.remoteAddress,
    remotePort: req.socket?.remotePort,
  };
}

/** pino's error serializer, with URL parameters in its text redacted. */
export function serializeError(err: unknown): unknown {
  const out: unknown = pino.stdSerializers.err(err as Error);
  const proto = out !== null && typeof out === 'object' ? Object.getPrototypeOf(out) : undefined;
  return redactDeep(out, proto);
}

/** Fields that hold credentials or bodies, censored wherever a log line names them. */
const CENSORED_PATHS = [
  'password',
  'secret',
  'token',
  'authorization',
  'body',
  ...['headers', 'req.headers', 'res.headers'].flatMap((at) =>
    [
      'authorization',
      'proxy-authorization',
      'cookie',
      'set-cookie',
      'x-amz-security-token',
      'x-api-key',
    ].map((h) => `${at}["${h}"]`),
  ),
];

/**
 * A child of `logger` that applies the rules above: `req`, `err` and `url` fields are
 * serialized with their secrets redacted, and credential fields are censored.
 */
export function redactingLogger(logger: Logger): Logger {
  return logger.child(
    {},
    {
      serializers: {
        req: serializeRequest,
        err: serializeError,
        url: (url: unknown) => (typeof url === 'string' ? redactUrl(url) : url),
      },
      redact: { paths: CENSORED_PATHS, censor: REDACTED },
    },
  );
}
