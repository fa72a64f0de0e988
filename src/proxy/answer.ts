/**
 * The proxy's own answers (when it cannot reach a machine), in pier's error format
 * `{error, code}` with catalogue statuses, so a client sees the same shape from the
 * proxy as from the API. Written to a `ServerResponse`, or as raw HTTP/1.1 to the
 * socket of an upgrade request, which has no response object.
 */
import type { ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { STATUS_CODES } from 'node:http';
import { ApiError } from '../errors/api-error.js';

function body(err: ApiError): string {
  return JSON.stringify(err.toBody());
}

/** Answers `err` on `res` unless an answer has already begun (then the reply is cut). */
export function answerError(res: ServerResponse, err: ApiError): void {
  if (res.headersSent) {
    // Half an answer cannot become an error; cutting it is the only honest signal.
    res.destroy();
    return;
  }
  const text = body(err);
  const headers: Record<string, string | number> = {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(text),
    'cache-control': 'no-store',
  };
  if (err.retryAfter !== undefined) headers['retry-after'] = err.retryAfter;
  res.writeHead(err.status, headers);
  res.end(text);
}

/** Answers `err` on the raw socket of an upgrade request and closes it. */
export function answerErrorRaw(socket: Duplex, err: ApiError): void {
  if (socket.destroyed || !socket.writable) {
    socket.destroy();
    return;
  }
  const text = body(err);
  const head =
    `HTTP/1.1 ${err.status} ${STATUS_CODES[err.status] ?? ''}\r\n` +
    'Content-Type: application/json; charset=utf-8\r\n' +
    `Content-Length: ${Buffer.byteLength(text)}\r\n` +
    'Cache-Control: no-store\r\n' +
    'Connection: close\r\n\r\n';
  socket.end(head + text);
}
