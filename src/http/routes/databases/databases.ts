/**
 * Databases (spec 4.3, `/v1/resources`): create, list, read, change, delete; branch,
 * fork, restore in place and the one-time URL of a copy. The routes only validate and
 * call the databases service; `docs/api.md` documents the parts the spec leaves open.
 */
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import {
  branchBody,
  copyUrlSchema,
  createResourceBody,
  createdDatabaseSchema,
  databaseListSchema,
  databaseParams as params,
  databaseSchema,
  forkBody,
  restoreBody,
  restoringDatabaseSchema,
  updateResourceBody,
} from '../../../contracts/databases.js';
import {
  branchDatabase,
  forkDatabase,
  restoreDatabase,
} from '../../../services/databases/copies.js';
import { createDatabase } from '../../../services/databases/create.js';
import {
  getDatabase,
  handOutCopyUrl,
  listDatabases,
  updateDatabase,
} from '../../../services/databases/manage.js';
import { removeDatabaseNow } from '../../../services/databases/remove.js';
import type { AppDeps } from '../../deps.js';
import { principalOf } from '../../plugins/auth.js';
import { auth } from '../../route-auth.js';

const tags = ['databases'];

export function databaseRoutes(root: FastifyInstance, deps: AppDeps): void {
  const app = root.withTypeProvider<ZodTypeProvider>();
  const ctx = deps.ctx;

  app.post('/v1/resources', {
    config: { auth: auth.F('AW') },
    schema: {
      tags,
      summary: 'Create a database (postgres or redis); the answer carries its URL, once',
      body: createResourceBody,
      response: { 201: createdDatabaseSchema },
    },
    handler: async (req, reply) =>
      reply.code(201).send(await createDatabase(ctx, principalOf(req).orgId, req.body)),
  });

  app.get('/v1/resources', {
    config: { auth: auth.R('AA') },
    schema: { tags, summary: 'List databases', response: { 200: databaseListSchema } },
    handler: async (req) => listDatabases(ctx, principalOf(req).orgId),
  });

  app.get('/v1/resources/:name', {
    config: { auth: auth.F('AA') },
    schema: { tags, summary: 'One database', params, response: { 200: databaseSchema } },
    handler: async (req) => getDatabase(ctx, principalOf(req).orgId, req.params.name),
  });

  app.patch('/v1/resources/:name', {
    config: { auth: auth.F('AW') },
    schema: {
      tags,
      summary: "Change the sleep policy, or a copy's expiry",
      params,
      body: updateResourceBody,
      response: { 200: databaseSchema },
    },
    handler: async (req) => updateDatabase(ctx, principalOf(req).orgId, req.params.name, req.body),
  });

  app.delete('/v1/resources/:name', {
    config: { auth: auth.F('AW') },
    schema: {
      tags,
      summary: 'Delete a database: its servers, data, archive and attachments',
      params,
    },
    handler: async (req, reply) => {
      await removeDatabaseNow(ctx, principalOf(req).orgId, req.params.name);
      return reply.code(204).send();
    },
  });

  app.post('/v1/resources/:name/branch', {
    config: { auth: auth.F('AW') },
    schema: {
      tags,
      summary: 'Branch: a copy-on-write copy of the database as it is now',
      params,
      body: branchBody,
      response: { 202: databaseSchema },
    },
    handler: async (req, reply) =>
      reply
        .code(202)
        .send(await branchDatabase(ctx, principalOf(req).orgId, req.params.name, req.body)),
  });

  app.post('/v1/resources/:name/fork', {
    config: { auth: auth.F('AW') },
    schema: {
      tags,
      summary: 'Fork: a full copy restored from the archive, as of a moment (default now)',
      params,
      body: forkBody,
      response: { 202: databaseSchema },
    },
    handler: async (req, reply) =>
      reply
        .code(202)
        .send(await forkDatabase(ctx, principalOf(req).orgId, req.params.name, req.body)),
  });

  app.post('/v1/resources/:name/restore', {
    config: { auth: auth.F('AW') },
    schema: {
      tags,
      summary: 'Restore in place to a moment; the state before is kept as a branch',
      description:
        'Answers 202 with the database in state restoring and `preservedUnderName`, the branch ' +
        'that keeps the state before the restore. The URL, port and password stay the same.',
      params,
      body: restoreBody,
      response: { 202: restoringDatabaseSchema },
    },
    handler: async (req, reply) =>
      reply
        .code(202)
        .send(await restoreDatabase(ctx, principalOf(req).orgId, req.params.name, req.body)),
  });

  app.post('/v1/resources/:name/url', {
    config: { auth: auth.F('AW') },
    schema: {
      tags,
      summary: "A copy's connection URL, handed out exactly once",
      params,
      response: { 200: copyUrlSchema },
    },
    handler: async (req) => handOutCopyUrl(ctx, principalOf(req).orgId, req.params.name),
  });
}
