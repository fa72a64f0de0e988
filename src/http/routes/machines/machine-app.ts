/**
 * The app of the machine named by the `:id` path parameter, for the agent rules of the
 * routes under `/v1/machines/:id` (an agent token limited to some apps reaches exactly
 * their machines). Another organization's machine, or none, has no app.
 */
import type { FastifyRequest } from 'fastify';
import type { ServiceContext } from '../../../services/context.js';

export const appOfMachine =
  (ctx: ServiceContext) =>
  async (req: FastifyRequest, orgId: string): Promise<string | undefined> => {
    const id = (req.params as Record<string, string | undefined>)?.id;
    if (!id) return undefined;
    const row = await ctx.db
      .selectFrom('machines')
      .innerJoin('apps', 'apps.id', 'machines.app_id')
      .select('apps.name')
      .where('machines.id', '=', id)
      .where('machines.org_id', '=', orgId)
      .executeTakeFirst();
    return row?.name;
  };
