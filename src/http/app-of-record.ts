/**
 * The app of the record a route's `:id` names (a build, a deploy), for agent tokens
 * limited to some apps: the judge sees the record's app as if the path had named it.
 * Another organization's record has no app here, so it is judged like a missing one.
 */
import type { FastifyRequest } from 'fastify';
import type { ServiceContext } from '../services/context.js';

export const appOfRecord =
  (ctx: ServiceContext, table: 'builds' | 'deploys') =>
  async (req: FastifyRequest, orgId: string): Promise<string | undefined> => {
    const id = (req.params as Record<string, string | undefined>)?.id;
    if (!id) return undefined;
    const row = await ctx.db
      .selectFrom(table)
      .innerJoin('apps', 'apps.id', `${table}.app_id`)
      .select('apps.name')
      .where(`${table}.id`, '=', id)
      .where(`${table}.org_id`, '=', orgId)
      .executeTakeFirst();
    return row?.name;
  };
