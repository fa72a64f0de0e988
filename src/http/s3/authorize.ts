/**
 * Who may do what at the gateway: every request is signed with SigV4 (header or
 * presigned query) by a key that reaches exactly one bucket. A key asking for any other
 * bucket, existing or not, gets AccessDenied, so the gateway never tells whether another
 * organization's bucket exists.
 */
import type { FastifyRequest } from 'fastify';
import { ObjectError } from '../../services/buckets/object-error.js';
import type { S3KeyGrant } from '../../services/buckets/s3-keys.js';
import { findS3Key } from '../../services/buckets/s3-keys.js';
import type { ServiceContext } from '../../services/context.js';
import { verifyRequest } from '../../objects/sigv4/verify.js';
import type { VerifiedAuth } from '../../objects/sigv4/types.js';
import type { S3Target } from './request.js';

/** Grants are cached briefly; revocation drops them at once (see invalidateGrant). */
const GRANT_TTL_MS = 30_000;

export class GrantCache {
  private readonly grants = new Map<string, { grant: S3KeyGrant; at: number }>();
  /** Bumped by every invalidation: a lookup that raced one must not cache what it read. */
  private generation = 0;

  constructor(private readonly ctx: ServiceContext) {}

  async get(accessKeyId: string): Promise<S3KeyGrant | undefined> {
    const hit = this.grants.get(accessKeyId);
    if (hit && Date.now() - hit.at < GRANT_TTL_MS) return hit.grant;
    const gen = this.generation;
    const grant = await findS3Key(this.ctx, accessKeyId);
    // Unknown keys are not cached: a flood of random ids must not grow the map.
    if (grant && gen === this.generation) this.grants.set(accessKeyId, { grant, at: Date.now() });
    return grant;
  }

  /** Drops one key, or (without an id) every key, e.g. when an organization changes. */
  invalidate(accessKeyId?: string): void {
    this.generation++;
    if (accessKeyId === undefined) this.grants.clear();
    else this.grants.delete(accessKeyId);
  }
}

export interface Authorized {
  auth: VerifiedAuth;
  grant: S3KeyGrant;
}

export async function authorize(
  req: FastifyRequest,
  target: S3Target,
  ctx: ServiceContext,
  grants: GrantCache,
): Promise<Authorized> {
  let grant: S3KeyGrant | undefined;
  const auth = await verifyRequest(
    { method: req.method, rawPath: target.rawPath, query: target.rawQuery, headers: req.headers },
    async (id) => {
      grant = await grants.get(id);
      return grant?.secret;
    },
    { now: ctx.clock() },
  );
  if (!grant) throw new ObjectError('AccessDenied', 'Access Denied');
  if (grant.suspended) throw new ObjectError('AccessDenied', 'The organization is suspended.');
  if (target.bucket !== undefined && target.bucket !== grant.bucketName) {
    throw new ObjectError('AccessDenied', 'Access Denied');
  }
  return { auth, grant };
}
