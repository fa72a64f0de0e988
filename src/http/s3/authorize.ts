/**
 * Who may do what at the gateway: every request is signed with SigV4 (header or
 * presigned query) by a key that reaches exactly one bucket. A key asking for any other
 * bucket, existing or not, gets AccessDenied, so the gateway never tells whether another
 * organization's bucket exists. A read-only key (a preview's) may only GET and HEAD.
 */
import type { FastifyRequest } from 'fastify';
import { ObjectError } from '../../services/buckets/object-error.js';
import { grantOf, type S3KeyGrant } from '../../services/buckets/s3-keys.js';
import type { ServiceContext } from '../../services/context.js';
import { verifyRequest } from '../../objects/sigv4/verify.js';
import type { VerifiedAuth } from '../../objects/sigv4/types.js';
import type { S3Target } from './request.js';

export interface Authorized {
  auth: VerifiedAuth;
  grant: S3KeyGrant;
}

export async function authorize(
  req: FastifyRequest,
  target: S3Target,
  ctx: ServiceContext,
): Promise<Authorized> {
  let grant: S3KeyGrant | undefined;
  const auth = await verifyRequest(
    { method: req.method, rawPath: target.rawPath, query: target.rawQuery, headers: req.headers },
    async (id) => {
      grant = await grantOf(ctx, id);
      return grant?.secret;
    },
    { now: ctx.clock() },
  );
  if (!grant) throw new ObjectError('AccessDenied', 'Access Denied');
  if (grant.suspended) throw new ObjectError('AccessDenied', 'The organization is suspended.');
  // A read-only key (a preview's) reads, lists and heads; it never writes or deletes.
  if (grant.readOnly && req.method !== 'GET' && req.method !== 'HEAD') {
    throw new ObjectError('AccessDenied', 'This key may only read (a preview’s key).');
  }
  if (target.bucket !== undefined && target.bucket !== grant.bucketName) {
    throw new ObjectError('AccessDenied', 'Access Denied');
  }
  return { auth, grant };
}
