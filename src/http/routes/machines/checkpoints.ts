/**
 * Machine checkpoints (spec 4.9): take, list, delete and restore named snapshots of a
 * machine's disk. The routes validate and call the checkpoints service; docs/api.md
 * ("Machine checkpoints") documents the bodies and answers the spec leaves open.
 */
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import {
  checkpointListQuery,
  checkpointListSchema,
  checkpointParams as labelParams,
  checkpointSchema,
  createCheckpointBody,
  machineIdParams as idParams,
  restoreAnswerSchema,
  restoreCheckpointBody,
} from '../../../contracts/machines.js';
import {
  createCheckpoint,
  deleteCheckpoint,
  listCheckpoints,
  restoreCheckpoint,
} from '../../../services/machines/checkpoints.js';
import type { AppDeps } from '../../deps.js';
import { principalOf } from '../../plugins/auth.js';
import { auth } from '../../route-auth.js';
import { appOfMachine } from './machine-app.js';

const tags = ['machines'];

export function machineCheckpointRoutes(root: FastifyInstance, { ctx }: AppDeps): void {
  const app = root.withTypeProvider<ZodTypeProvider>();
  const appOf = appOfMachine(ctx);

  app.post('/v1/machines/:id/checkpoints', {
    config: { auth: { ...auth.F('AW'), appOf } },
    schema: {
      tags,
      summary: "Checkpoint the machine's disk (memory: true is 501 where CRIU cannot run)",
      params: idParams,
      body: createCheckpointBody,
      response: { 201: checkpointSchema },
    },
    handler: async (req, reply) => {
      const made = await createCheckpoint(ctx, principalOf(req).orgId, req.params.id, req.body);
      return reply.code(201).send(made);
    },
  });

  app.get('/v1/machines/:id/checkpoints', {
    config: { auth: { ...auth.R('AA'), appOf } },
    schema: {
      tags,
      summary: "The machine's checkpoints, oldest first (auto=1 includes automatic ones)",
      params: idParams,
      querystring: checkpointListQuery,
      response: { 200: checkpointListSchema },
    },
    handler: async (req) =>
      listCheckpoints(ctx, principalOf(req).orgId, req.params.id, {
        auto: req.query.auto === '1' || req.query.auto === 'true',
      }),
  });

  app.delete('/v1/machines/:id/checkpoints/:label', {
    config: { auth: { ...auth.F('AW'), appOf } },
    schema: { tags, summary: 'Delete a checkpoint', params: labelParams },
    handler: async (req, reply) => {
      await deleteCheckpoint(ctx, principalOf(req).orgId, req.params.id, req.params.label);
      return reply.code(204).send();
    },
  });

  app.post('/v1/machines/:id/checkpoints/:label/restore', {
    config: { auth: { ...auth.F('AW'), appOf } },
    schema: {
      tags,
      summary: "Restore the machine's disk from a checkpoint (keepCurrent saves it first)",
      params: labelParams,
      body: restoreCheckpointBody,
      response: { 200: restoreAnswerSchema },
    },
    handler: async (req) =>
      restoreCheckpoint(ctx, principalOf(req).orgId, req.params.id, req.params.label, {
        keepCurrent: req.body?.keepCurrent ?? true,
      }),
  });
}
