/** Attach and detach (CONTRACT 3): buckets, databases and volumes. */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import {
  appParams as nameParams,
  attachBody,
  attachmentAnswerSchema,
  detachBody,
} from '../../../contracts/apps.js';
import { bucketAttachmentListSchema } from '../../../contracts/buckets.js';
import {
  attachBucket,
  detachBucket,
  listBucketAttachments,
} from '../../../services/buckets/attachments.js';
import { attachDatabase, detachDatabase } from '../../../services/databases/attachments.js';
import { attachVolume, detachVolume } from '../../../services/volumes/attachments.js';
import type { AppDeps } from '../../deps.js';
import { principalOf } from '../../plugins/auth.js';
import { appFromParams, auth } from '../../route-auth.js';

/**
 * What an attach or a detach hands the app from outside it, refused to an agent token
 * limited to some apps (`agent-token-app-scope`, judged and audited like every agent
 * rule): a database or a bucket, whose credentials the app's machines would hold (and
 * which other apps may share), either way. A volume belongs to at most one app: attaching
 * a free one is refused too (its data is the organization's, perhaps left by an app the
 * token cannot reach), but detaching one from an app the token may act on takes nothing
 * from outside its reach, so it is allowed.
 */
const KINDS = ['database', 'bucket', 'volume'] as const;
const handsOver =
  (verb: 'attach' | 'detach') =>
  (req: FastifyRequest): string | undefined => {
    const body = req.body as Record<string, unknown> | undefined;
    if (typeof body !== 'object' || body === null) return undefined;
    for (const kind of verb === 'attach' ? KINDS : KINDS.slice(0, 2)) {
      if (kind in body) return `${verb} the ${kind} '${String(body[kind])}'`;
    }
    return undefined;
  };

export function attachRoutes(root: FastifyInstance, { ctx }: AppDeps): void {
  const app = root.withTypeProvider<ZodTypeProvider>();

  app.post('/v1/apps/:name/attach', {
    config: { auth: { ...auth.F('AW', appFromParams), widens: handsOver('attach') } },
    schema: {
      tags: ['apps'],
      summary: 'Attach a bucket (with `as`), a database or a volume',
      params: nameParams,
      body: attachBody,
      response: { 200: attachmentAnswerSchema },
    },
    handler: async (req) => {
      const orgId = principalOf(req).orgId;
      if ('bucket' in req.body)
        return attachBucket(ctx, orgId, req.params.name, req.body.bucket, req.body.as);
      if ('database' in req.body)
        return attachDatabase(ctx, orgId, req.params.name, req.body.database);
      return attachVolume(ctx, orgId, req.params.name, req.body.volume);
    },
  });

  app.post('/v1/apps/:name/detach', {
    config: { auth: { ...auth.F('AW', appFromParams), widens: handsOver('detach') } },
    schema: {
      tags: ['apps'],
      summary: 'Detach a bucket, a database or a volume; its managed secrets are removed',
      params: nameParams,
      body: detachBody,
      response: { 200: attachmentAnswerSchema },
    },
    handler: async (req) => {
      const orgId = principalOf(req).orgId;
      if ('bucket' in req.body) return detachBucket(ctx, orgId, req.params.name, req.body.bucket);
      if ('database' in req.body)
        return detachDatabase(ctx, orgId, req.params.name, req.body.database);
      return detachVolume(ctx, orgId, { name: req.body.volume }, req.params.name);
    },
  });

  app.get('/v1/bucket-attachments', {
    config: { auth: auth.R('AA') },
    schema: {
      tags: ['buckets'],
      summary: 'Every bucket attachment of the organization',
      response: { 200: bucketAttachmentListSchema },
    },
    handler: async (req) => listBucketAttachments(ctx.db, principalOf(req).orgId),
  });
}
