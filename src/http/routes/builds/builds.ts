/**
 * Sources, detect and builds (CONTRACT 7). The source upload's body is the archive,
 * kept as the raw stream whatever its content type (streamed to disk by the service).
 * docs/api.md ("Builds") documents the answers.
 */
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { appParams } from '../../../contracts/apps.js';
import {
  buildIdParams,
  buildListSchema,
  buildLogsQuery,
  buildSchema,
  createBuildBody,
  detectBody,
  detectionSchema,
  sourceSchema,
} from '../../../contracts/builds.js';
import { buildLogs, createBuild, getBuild, listBuilds } from '../../../services/builds/builds.js';
import { detect } from '../../../services/builds/detect.js';
import { uploadSource } from '../../../services/builds/sources.js';
import { appOfRecord } from '../../app-of-record.js';
import type { AppDeps } from '../../deps.js';
import { principalOf } from '../../plugins/auth.js';
import { appFromParams, auth } from '../../route-auth.js';

const tags = ['builds'];

export function buildRoutes(root: FastifyInstance, { ctx }: AppDeps): void {
  const appOf = appOfRecord(ctx, 'builds');
  void root.register(async (scope) => {
    // The upload's body is the archive: never parsed, streamed to disk by the service.
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', (_req, _payload, done) => done(null, undefined));
    const app = scope.withTypeProvider<ZodTypeProvider>();
    app.post('/v1/apps/:name/sources', {
      config: { auth: auth.D('AW', appFromParams) },
      schema: {
        tags,
        summary: "Upload a source tree (the body: a gzip'd tar)",
        params: appParams,
        response: { 201: sourceSchema },
      },
      handler: async (req, reply) => {
        const length = Number(req.headers['content-length']);
        const source = await uploadSource(
          ctx,
          principalOf(req).orgId,
          req.params.name,
          req.raw,
          Number.isFinite(length) ? length : undefined,
        );
        return reply.code(201).send(source);
      },
    });
  });

  const app = root.withTypeProvider<ZodTypeProvider>();
  app.post('/v1/apps/:name/detect', {
    config: { auth: auth.D('AA', appFromParams) },
    schema: {
      tags,
      summary: 'What kind of app a source is, and the Dockerfile pier would build it with',
      params: appParams,
      body: detectBody,
      response: { 200: detectionSchema },
    },
    handler: async (req) => detect(ctx, principalOf(req).orgId, req.params.name, req.body.source),
  });

  app.post('/v1/apps/:name/builds', {
    config: { auth: auth.D('AW', appFromParams) },
    schema: {
      tags,
      summary: 'Build an image from a source',
      params: appParams,
      body: createBuildBody,
      response: { 202: buildSchema },
    },
    handler: async (req, reply) =>
      reply
        .code(202)
        .send(await createBuild(ctx, principalOf(req).orgId, req.params.name, req.body)),
  });

  app.get('/v1/apps/:name/builds', {
    config: { auth: auth.R('AA', appFromParams) },
    schema: {
      tags,
      summary: "An app's builds, newest first",
      params: appParams,
      response: { 200: buildListSchema },
    },
    handler: async (req) => listBuilds(ctx, principalOf(req).orgId, req.params.name),
  });

  app.get('/v1/builds/:id', {
    config: { auth: { ...auth.R('AA'), appOf } },
    schema: { tags, summary: 'One build', params: buildIdParams, response: { 200: buildSchema } },
    handler: async (req) => getBuild(ctx, principalOf(req).orgId, req.params.id),
  });

  app.get('/v1/builds/:id/logs', {
    config: { auth: { ...auth.R('AA'), appOf } },
    schema: {
      tags,
      summary: "The builder's output (follow=1: until the build ends)",
      params: buildIdParams,
      querystring: buildLogsQuery,
    },
    handler: async (req, reply) => {
      const ended = new AbortController();
      reply.raw.once('close', () => ended.abort());
      const stream = await buildLogs(
        ctx,
        principalOf(req).orgId,
        req.params.id,
        req.query.follow === '1',
        ended.signal,
      );
      return reply.type('text/plain; charset=utf-8').send(stream);
    },
  });
}
