/**
 * Metered usage (spec 2.9 "Usage list", 4.7 `GET /v1/usage`): the raw events booked for
 * the organization in a period, oldest first, at most `USAGE_LIMIT` of them.
 */
import type { UsageList, UsageQuery } from '../contracts/billing.js';
import { badRequest } from '../errors/api-error.js';
import type { ServiceContext } from './context.js';

export const USAGE_LIMIT = 1000;
/** Without `from`, the period starts this long before `to`. */
const DEFAULT_PERIOD_MS = 30 * 24 * 3600_000;

export async function listUsage(
  ctx: ServiceContext,
  orgId: string,
  q: UsageQuery,
): Promise<UsageList> {
  const to = q.to ? new Date(q.to) : ctx.clock();
  const from = q.from ? new Date(q.from) : new Date(to.getTime() - DEFAULT_PERIOD_MS);
  if (from > to) throw badRequest([{ path: 'from', message: 'must not be after to' }]);
  const rows = await ctx.db
    .selectFrom('usage_events')
    .select(['id', 'org_id', 'kind', 'quantity', 'at'])
    .where('org_id', '=', orgId)
    .where('at', '>=', from)
    .where('at', '<', to)
    .orderBy('at')
    .orderBy('id')
    .limit(USAGE_LIMIT + 1)
    .execute();
  return {
    period: { from: from.toISOString(), to: to.toISOString() },
    events: rows.slice(0, USAGE_LIMIT).map((r) => ({
      id: String(r.id),
      orgId: r.org_id,
      kind: r.kind,
      quantity: Number(r.quantity),
      at: r.at.toISOString(),
    })),
    truncated: rows.length > USAGE_LIMIT,
    limit: USAGE_LIMIT,
  };
}
