/** The audit trail of agent tokens: one entry per judged request, with its verdict. */
import type { AgentAction } from '../contracts/agent-actions.js';
import { newId } from '../crypto/tokens.js';
import type { Db } from '../store/db.js';

export interface AgentActionInput {
  orgId: string;
  tokenId: string;
  method: string;
  route: string;
  path: string;
  app: string | undefined;
  code: string | undefined;
  requestId: string;
  at: Date;
}

export async function recordAgentAction(db: Db, a: AgentActionInput): Promise<void> {
  await db
    .insertInto('agent_actions')
    .values({
      id: newId('act'),
      org_id: a.orgId,
      token_id: a.tokenId,
      method: a.method,
      route: a.route,
      path: a.path.slice(0, 2048),
      app: a.app ?? null,
      verdict: a.code ? 'refused' : 'allowed',
      code: a.code ?? null,
      request_id: a.requestId,
      at: a.at,
    })
    .execute();
}

export async function listAgentActions(
  db: Db,
  orgId: string,
  opts: { limit: number; token?: string },
): Promise<AgentAction[]> {
  let q = db.selectFrom('agent_actions').selectAll().where('org_id', '=', orgId);
  if (opts.token) q = q.where('token_id', '=', opts.token);
  const rows = await q.orderBy('at', 'desc').orderBy('id', 'desc').limit(opts.limit).execute();
  return rows.map((r) => ({
    id: r.id,
    tokenId: r.token_id,
    method: r.method,
    route: r.route,
    path: r.path,
    ...(r.app ? { app: r.app } : {}),
    verdict: r.verdict,
    ...(r.code ? { code: r.code } : {}),
    requestId: r.request_id,
    at: r.at.toISOString(),
  }));
}
