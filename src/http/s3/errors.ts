/**
 * The S3 gateway's own error renderer: S3 clients expect S3's XML error bodies and codes,
 * never the JSON of the control API.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ObjectError } from '../../services/buckets/object-error.js';
import { BlobError } from '../../objects/blobs/blob-store.js';
import { SigV4Error } from '../../objects/sigv4/errors.js';
import { xmlDocument, type XmlNode } from './xml.js';
import { RequestValidationError } from '../plugins/validation.js';

interface S3Failure {
  status: number;
  code: string;
  message: string;
  fields: Record<string, string>;
}

function classify(err: unknown): S3Failure | undefined {
  if (err instanceof ObjectError)
    return { status: err.status, code: err.code, message: err.message, fields: err.fields };
  if (err instanceof SigV4Error) {
    return {
      status: err.status,
      code: err.code,
      message: err.message,
      fields: (err.details ?? {}) as Record<string, string>,
    };
  }
  if (err instanceof BlobError) {
    // The body verifier failed (digest, chunk signature, checksum): that is the answer,
    // not the store's view of it as an aborted or failed write.
    if (err.cause instanceof ObjectError || err.cause instanceof SigV4Error)
      return classify(err.cause);
    if (err.code === 'too-large')
      return {
        status: 400,
        code: 'EntityTooLarge',
        message: 'Your proposed upload exceeds the maximum allowed size.',
        fields: {},
      };
    if (err.code === 'not-found')
      return {
        status: 404,
        code: 'NoSuchKey',
        message: 'The specified key does not exist.',
        fields: {},
      };
    if (err.code === 'aborted')
      return {
        status: 400,
        code: 'IncompleteBody',
        message: 'The request body ended early.',
        fields: {},
      };
  }
  // The API's text rule (plugins/validation.ts) runs here too: S3 calls it InvalidArgument.
  if (err instanceof RequestValidationError) {
    const issue = err.issues[0];
    return {
      status: 400,
      code: 'InvalidArgument',
      message: `${issue?.path || 'The request'}: ${issue?.message ?? 'invalid'}.`,
      fields: {},
    };
  }
  const fe = err as { code?: string; statusCode?: number };
  if (fe?.code === 'FST_ERR_CTP_BODY_TOO_LARGE') {
    return {
      status: 400,
      code: 'EntityTooLarge',
      message: 'Your proposed upload exceeds the maximum allowed size.',
      fields: {},
    };
  }
  return undefined;
}

/**
 * On every answer of the gateway, errors included. The gateway shares its origin with the
 * API and the console (path-style under `/s3`), so a stored HTML or SVG object opened in a
 * browser must not run as that origin: `sandbox` makes it an opaque origin without
 * script (no access to the console's cookies or storage), and `nosniff` keeps browsers
 * from reading a `text/plain` or octet-stream object as HTML or script.
 */
export const SANDBOX_HEADERS = {
  'x-content-type-options': 'nosniff',
  'content-security-policy': 'sandbox',
} as const;

export function sendS3Error(
  req: FastifyRequest,
  reply: FastifyReply,
  err: unknown,
  resource: string,
): FastifyReply {
  let failure = classify(err);
  if (!failure) {
    req.log.error({ err }, 's3 gateway failure');
    failure = {
      status: 500,
      code: 'InternalError',
      message: `We encountered an internal error (request ${req.id}).`,
      fields: {},
    };
  }
  const body: XmlNode = {
    Code: failure.code,
    Message: failure.message,
    ...failure.fields,
    Resource: resource,
    RequestId: req.id,
  };
  reply
    .code(failure.status)
    .headers(SANDBOX_HEADERS)
    .header('content-type', 'application/xml')
    .header('x-amz-request-id', req.id);
  // HEAD answers carry no body; clients read the status alone.
  return reply.send(req.method === 'HEAD' ? undefined : xmlDocument('Error', body, false));
}
