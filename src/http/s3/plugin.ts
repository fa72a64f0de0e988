/**
 * The S3-compatible gateway, path-style under `/s3` on pier's own listener:
 * `PUBLIC_URL/s3/<bucket>/<key>`. It has its own body handling (raw streams, never
 * parsed or buffered), its own auth (SigV4) and its own XML error renderer.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ObjectError } from '../../services/buckets/object-error.js';
import type { ServiceContext } from '../../services/context.js';
import { authorize, type Authorized } from './authorize.js';
import {
  handleDeleteMany,
  handleListBuckets,
  handleListObjects,
  handleLocation,
} from './buckets.js';
import { decorateActual, handlePreflight } from './cors.js';
import { SANDBOX_HEADERS, sendS3Error } from './errors.js';
import {
  handleAbort,
  handleComplete,
  handleCreateUpload,
  handleListParts,
  handleListUploads,
  handleUploadPart,
  handleUploadPartCopy,
} from './multipart.js';
import { handleDeleteObject, handleGetObject, handlePutObject } from './objects.js';
import { GATEWAY_PREFIX, targetOf, type S3Target } from './request.js';

type Handler = (
  req: FastifyRequest,
  reply: FastifyReply,
  t: S3Target,
  a: Authorized,
) => Promise<unknown> | unknown;

/** Bucket-level subresources S3 has and pier does not: answered 501, not misread as listing. */
const UNSUPPORTED = [
  'acl',
  'policy',
  'lifecycle',
  'tagging',
  'website',
  'replication',
  'logging',
  'notification',
  'encryption',
  'object-lock',
  'accelerate',
  'requestPayment',
  'analytics',
  'metrics',
  'inventory',
  'intelligent-tiering',
  'ownershipControls',
  'publicAccessBlock',
  'torrent',
  'retention',
  'legal-hold',
  'restore',
  'select',
  'attributes',
  'versions',
];

function route(ctx: ServiceContext, req: FastifyRequest, t: S3Target): Handler {
  const q = t.query;
  const m = req.method;
  for (const sub of UNSUPPORTED) {
    if (q.has(sub))
      return () => {
        throw new ObjectError(
          'NotImplemented',
          `The ${sub} subresource is not supported by this gateway.`,
        );
      };
  }
  if (t.bucket === undefined) {
    if (m === 'GET') return (_r, reply, _t, a) => handleListBuckets(ctx, reply, a);
  } else if (t.key === undefined) {
    if (m === 'GET' && q.has('location')) return (_r, reply) => handleLocation(ctx, reply);
    if (m === 'GET' && q.has('versioning')) {
      return (_r, reply) =>
        reply
          .code(200)
          .header('content-type', 'application/xml')
          .send(
            '<?xml version="1.0" encoding="UTF-8"?>\n<VersioningConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/"/>',
          );
    }
    if (m === 'GET' && q.has('uploads'))
      return (_r, reply, tt, a) => handleListUploads(ctx, reply, tt, a);
    if (m === 'GET' || m === 'HEAD') {
      if (m === 'HEAD') return (_r, reply) => reply.code(200).send();
      return (_r, reply, tt, a) => handleListObjects(ctx, reply, tt, a);
    }
    if (m === 'POST' && q.has('delete'))
      return (r, reply, _t, a) => handleDeleteMany(ctx, r, reply, a);
    if (m === 'PUT' || m === 'DELETE') {
      return () => {
        throw new ObjectError(
          'AccessDenied',
          'Buckets are created and deleted through the pier API, not the S3 gateway.',
        );
      };
    }
  } else {
    const upload = q.get('uploadId');
    if (m === 'POST' && q.has('uploads'))
      return (r, reply, tt, a) => handleCreateUpload(ctx, r, reply, tt, a);
    if (upload !== undefined) {
      if (m === 'PUT' && q.has('partNumber')) {
        if (req.headers['x-amz-copy-source'])
          return (r, reply, tt, a) => handleUploadPartCopy(ctx, r, reply, tt, a);
        return (r, reply, tt, a) => handleUploadPart(ctx, r, reply, tt, a);
      }
      if (m === 'POST') return (r, reply, tt, a) => handleComplete(ctx, r, reply, tt, a);
      if (m === 'DELETE') return (_r, reply, tt, a) => handleAbort(ctx, reply, tt, a);
      if (m === 'GET') return (_r, reply, tt, a) => handleListParts(ctx, reply, tt, a);
    }
    if (m === 'GET' || m === 'HEAD')
      return (r, reply, tt, a) => handleGetObject(ctx, r, reply, tt, a);
    if (m === 'PUT') return (r, reply, tt, a) => handlePutObject(ctx, r, reply, tt, a);
    if (m === 'DELETE') return (r, reply, tt, a) => handleDeleteObject(ctx, r, reply, tt, a);
  }
  return () => {
    throw new ObjectError(
      'MethodNotAllowed',
      'The specified method is not allowed against this resource.',
    );
  };
}

export async function s3Gateway(app: FastifyInstance, ctx: ServiceContext): Promise<void> {
  // Keys and CORS rules are read through ctx.bucketCaches, which platform.ts makes: the
  // gateway itself keeps no state.
  await app.register(
    async (gw) => {
      // Bodies stay raw streams: handlers read req.raw themselves, verifying as they go.
      gw.removeAllContentTypeParsers();
      gw.addContentTypeParser('*', (_req, _payload, done) => done(null, undefined));

      // Objects never run script as the API's (and console's) origin; see SANDBOX_HEADERS.
      gw.addHook('onRequest', (_req, reply, done) => {
        reply.headers(SANDBOX_HEADERS);
        done();
      });
      gw.setErrorHandler((err, req, reply) => sendS3Error(req, reply, err, safeResource(req)));
      gw.setNotFoundHandler((req, reply) =>
        sendS3Error(
          req,
          reply,
          new ObjectError(
            'MethodNotAllowed',
            'The specified method is not allowed against this resource.',
          ),
          safeResource(req),
        ),
      );

      const handle = async (req: FastifyRequest, reply: FastifyReply) => {
        reply.header('x-amz-request-id', req.id);
        const t = targetOf(req);
        if (req.method === 'OPTIONS') return handlePreflight(ctx, req, reply, t.bucket);
        await decorateActual(ctx, req, reply, t.bucket);
        const a = await authorize(req, t, ctx);
        return route(ctx, req, t)(req, reply, t, a);
      };
      const methods = ['GET', 'HEAD', 'PUT', 'POST', 'DELETE', 'OPTIONS'] as const;
      const config = { auth: 'gateway' as const };
      for (const url of ['', '/:bucket', '/:bucket/*']) {
        gw.route({
          method: [...methods],
          url,
          config,
          schema: { hide: true },
          handler: handle,
          exposeHeadRoute: false,
        });
      }
    },
    { prefix: GATEWAY_PREFIX },
  );
}

function safeResource(req: FastifyRequest): string {
  try {
    return targetOf(req).resource;
  } catch {
    return '/';
  }
}
