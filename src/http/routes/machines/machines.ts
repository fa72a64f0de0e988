/**
 * Machines (spec 4.9): create, list, read, wait, actions, and an app's logs. The routes
 * validate and call the machines service; `docs/api.md` documents what the spec leaves
 * open (the wait and logs queries, the actions' answers).
 */
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import {
  appLogsSchema,
  createMachineQuery,
  logsQuery,
  machineActionParams,
  machineAppParams as appParams,
  machineConfigSchema,
  machineIdParams as idParams,
  machineListSchema,
  machineSchema,
  waitQuery,
} from '../../../contracts/machines.js';
import { ApiError } from '../../../errors/api-error.js';
import { machineAction } from '../../../services/machines/lifecycle.js';
import { appLogs } from '../../../services/machines/logs.js';
import { machineScreenshot } from '../../../services/machines/screenshot.js';
import {
  createMachine,
  getMachine,
  listMachines,
  waitForState,
} from '../../../services/machines/machines.js';
import { toMachine } from '../../../services/machines/records.js';
import type { AppDeps } from '../../deps.js';
import { principalOf } from '../../plugins/auth.js';
import { appFromParams, auth } from '../../route-auth.js';
import { appOfMachine } from './machine-app.js';

const tags = ['machines'];

export function machineRoutes(root: FastifyInstance, { ctx }: AppDeps): void {
  const app = root.withTypeProvider<ZodTypeProvider>();
  const appOf = appOfMachine(ctx);

  app.post('/v1/apps/:name/machines', {
    config: { auth: auth.F('AW', appFromParams) },
    schema: {
      tags,
      summary: 'Create a machine; waits for running unless wait=false (then 202)',
      params: appParams,
      querystring: createMachineQuery,
      body: machineConfigSchema,
      response: { 201: machineSchema, 202: machineSchema },
    },
    handler: async (req, reply) => {
      const { machine, waited } = await createMachine(
        ctx,
        principalOf(req).orgId,
        req.params.name,
        req.body,
        req.query.wait !== 'false',
        { replace: req.query.replace },
      );
      return reply.code(waited ? 201 : 202).send(machine);
    },
  });

  app.get('/v1/apps/:name/machines', {
    config: { auth: auth.DorR('AA', appFromParams) },
    schema: {
      tags,
      summary: "An app's machines",
      params: appParams,
      response: { 200: machineListSchema },
    },
    handler: async (req) => listMachines(ctx, principalOf(req).orgId, req.params.name),
  });

  app.get('/v1/machines/:id', {
    config: { auth: { ...auth.R('AA'), appOf } },
    schema: { tags, summary: 'One machine', params: idParams, response: { 200: machineSchema } },
    handler: async (req) => getMachine(ctx, principalOf(req).orgId, req.params.id),
  });

  app.get('/v1/machines/:id/wait', {
    config: { auth: { ...auth.R('AA'), appOf } },
    schema: {
      tags,
      summary: 'Hold until the machine is in a state (default running), or 408 wait-timeout',
      params: idParams,
      querystring: waitQuery,
      response: { 200: machineSchema },
    },
    handler: async (req) => {
      const p = principalOf(req);
      const row = await waitForState(
        ctx,
        p.orgId,
        req.params.id,
        [req.query.state ?? 'running'],
        (req.query.timeout ?? 60) * 1000,
        p.signal,
      );
      return toMachine(row);
    },
  });

  app.post('/v1/machines/:id/:action', {
    config: { auth: { ...auth.F('AW'), appOf } },
    schema: {
      tags,
      summary: 'start, stop, suspend or destroy a machine',
      params: machineActionParams,
      response: { 200: machineSchema },
    },
    handler: async (req) =>
      machineAction(ctx, principalOf(req).orgId, req.params.id, req.params.action),
  });

  app.post('/v1/machines/:id/migrate', {
    config: { auth: { ...auth.F('AW'), appOf } },
    schema: {
      tags,
      summary: 'Move the machine to another host (501 while the installation has one host)',
      params: idParams,
    },
    handler: async (req) => {
      await getMachine(ctx, principalOf(req).orgId, req.params.id);
      throw new ApiError(
        'not-implemented',
        'This installation runs machines on one host, so there is no other host to move a machine to.',
      );
    },
  });

  app.get('/v1/machines/:id/screenshot', {
    config: { auth: { ...auth.R('AD'), appOf } },
    schema: {
      tags,
      summary: "A screenshot of a computer machine's desktop (409 not-a-computer otherwise)",
      params: idParams,
    },
    handler: async (req) => machineScreenshot(ctx, principalOf(req).orgId, req.params.id),
  });

  app.get('/v1/apps/:name/logs', {
    config: { auth: auth.R('AD', appFromParams) },
    schema: {
      tags,
      summary: "Console output of the app's machines, with a cursor to follow",
      params: appParams,
      querystring: logsQuery,
      response: { 200: appLogsSchema },
    },
    handler: async (req) =>
      appLogs(ctx, principalOf(req).orgId, req.params.name, {
        cursor: req.query.cursor,
        limit: req.query.limit ?? 100,
        machine: req.query.machine,
      }),
  });
}
