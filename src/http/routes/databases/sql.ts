/**
 * `POST /v1/resources/:name/sql` (pier's design, docs/api.md "SQL"): runs one statement
 * on a PostgreSQL database and answers its rows. The MCP tool `database_sql` stands for
 * this route, so an agent's SQL is judged and audited here like any other request.
 *
 * Authorized like the tunnel (the answer is the data): full keys only; for agent tokens
 * rule AD (a production-class token needs prodDataRead). Unlike the tunnel, a token
 * limited to some apps may reach a database attached to one of them: the database is
 * judged as that app's. A class that may only read (production) always runs read-only,
 * whatever the body says.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { sqlBody, sqlResult } from '../../../contracts/database-sql.js';
import { databaseParams as params } from '../../../contracts/databases.js';
import { appsOfDatabase, runSql } from '../../../services/databases/sql.js';
import type { AppDeps } from '../../deps.js';
import { principalOf } from '../../plugins/auth.js';
import { auth } from '../../route-auth.js';

export function databaseSqlRoutes(root: FastifyInstance, { ctx }: AppDeps): void {
  const app = root.withTypeProvider<ZodTypeProvider>();

  /** The attached app the agent judge weighs: one of the token's own if there is one. */
  const appOf = async (req: FastifyRequest, orgId: string) => {
    const apps = await appsOfDatabase(ctx.db, orgId, (req.params as { name: string }).name);
    const own = principalOf(req).key.agent?.apps;
    return apps.find((a) => own?.includes(a)) ?? apps[0];
  };

  app.post('/v1/resources/:name/sql', {
    config: { auth: { ...auth.F('AD'), appOf } },
    schema: {
      tags: ['databases'],
      summary: 'Run one SQL statement on a PostgreSQL database',
      params,
      body: sqlBody,
      response: { 200: sqlResult },
    },
    handler: async (req) => {
      const p = principalOf(req);
      const readOnly = req.body.readOnly === true || p.key.agent?.class === 'production';
      return runSql(ctx, p.orgId, req.params.name, req.body, readOnly);
    },
  });
}
