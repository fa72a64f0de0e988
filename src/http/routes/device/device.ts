/** Device login (spec 4.1, 4.2): the two entrances without a key and the console's side. */
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import {
  deviceApproveBody,
  deviceApprovedSchema,
  deviceCodeRequestBody,
  deviceCodeSchema,
  deviceLookupBody,
  deviceLookupSchema,
  deviceTokenBody,
  deviceTokenSchema,
} from '../../../contracts/device.js';
import { addressLimitKey } from '../../../host/address-key.js';
import {
  approveDevice,
  createDeviceCode,
  lookupDevice,
  pollDeviceToken,
} from '../../../services/device.js';
import { LOGIN_LIMIT } from '../../../services/rate-limit.js';
import type { AppDeps } from '../../deps.js';
import { principalOf } from '../../plugins/auth.js';
import { auth } from '../../route-auth.js';

export function deviceRoutes(root: FastifyInstance, { ctx, rateLimiter }: AppDeps): void {
  const app = root.withTypeProvider<ZodTypeProvider>();

  app.post('/v1/device/code', {
    config: { auth: 'public' },
    schema: {
      tags: ['device'],
      summary: 'Start a device login (no key)',
      security: [],
      // A request without a body reaches validation as null: it asks with no client named.
      body: deviceCodeRequestBody,
      response: { 201: deviceCodeSchema },
    },
    handler: async (req, reply) => {
      rateLimiter.hit(
        `device-code:${addressLimitKey(req.ip)}`,
        LOGIN_LIMIT.limit,
        LOGIN_LIMIT.windowMs,
      );
      return reply.code(201).send(await createDeviceCode(ctx, req.body ?? {}, req.ip));
    },
  });

  app.post('/v1/device/token', {
    config: { auth: 'public' },
    schema: {
      tags: ['device'],
      summary: 'Poll for the key of an approved device login (no key)',
      description:
        'While unapproved: 400 authorization-pending. Too fast: 429 rate-limited with Retry-After. ' +
        'Declined: 403 access-denied. Expired: 410 expired-token. Used: 410 gone.',
      security: [],
      body: deviceTokenBody,
      response: { 200: deviceTokenSchema },
    },
    handler: async (req) => {
      rateLimiter.hit(
        `device-token:${addressLimitKey(req.ip)}`,
        LOGIN_LIMIT.limit * 4,
        LOGIN_LIMIT.windowMs,
      );
      const { token, org } = await pollDeviceToken(ctx, req.body.deviceCode);
      return { token, org };
    },
  });

  app.post('/v1/device/lookup', {
    config: { auth: auth.F('A0') },
    schema: {
      tags: ['device'],
      summary: 'What a pending device login asks for',
      body: deviceLookupBody,
      response: { 200: deviceLookupSchema },
    },
    handler: async (req) => lookupDevice(ctx, req.body.userCode),
  });

  app.post('/v1/device/approve', {
    config: { auth: auth.F('A0') },
    schema: {
      tags: ['device'],
      summary: 'Approve (or decline) a device login',
      body: deviceApproveBody,
      response: { 200: deviceApprovedSchema },
    },
    handler: async (req) => {
      const p = principalOf(req);
      const userId = p.orgId === p.key.orgId ? p.key.userId : null;
      return approveDevice(ctx, p.orgId, userId, p.key.console ? null : p.key.expiresAt, req.body);
    },
  });
}
