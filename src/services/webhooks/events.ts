/**
 * Events into deliveries: the operator's mail-event route (CONTRACT 2) stands for the
 * mail system. One transaction writes the event (its payload, the exact bytes every
 * delivery signs) and one delivery per enabled webhook of the organization that asked
 * for the kind, due now, and notifies the dispatchers, which wake at commit.
 */
import { sql } from 'kysely';
import type { MailEventAnswer, MailEventBody } from '../../contracts/webhooks.js';
import { newId } from '../../crypto/tokens.js';
import { notFound } from '../../errors/api-error.js';
import type { ServiceContext } from '../context.js';
import { WEBHOOKS_CHANNEL } from './records.js';

/** The body of every delivery (docs/webhooks.md, Payload). */
export function eventPayload(kind: string, at: Date, data: unknown): string {
  return JSON.stringify({ type: kind, timestamp: at.toISOString(), data });
}

export async function emitMailEvent(
  ctx: ServiceContext,
  orgId: string,
  body: MailEventBody,
): Promise<MailEventAnswer> {
  const id = newId('evt');
  const createdAt = ctx.clock();
  const payload = eventPayload(body.kind, createdAt, body.data);
  // One statement: the event, and a delivery (due now) per enabled webhook that takes
  // the kind. The NOTIFY in the same transaction wakes the dispatchers at commit.
  const deliveries = await ctx.db.transaction().execute(async (tx) => {
    const { rows } = await sql<{ org: string | null; deliveries: number }>`
      WITH org AS (SELECT id FROM orgs WHERE id = ${orgId}),
      event AS (
        INSERT INTO webhook_events (id, org_id, kind, payload, created_at)
        SELECT ${id}, org.id, ${body.kind}, ${payload}, ${createdAt} FROM org
        RETURNING id),
      made AS (
        INSERT INTO webhook_deliveries (id, webhook_id, event_id, org_id, next_attempt_at)
        SELECT 'whd-' || substr(md5(event.id || w.id), 1, 16), w.id, event.id, w.org_id, now()
        FROM event JOIN webhooks w ON w.org_id = ${orgId}
        WHERE w.enabled AND ${body.kind} = ANY(w.events)
        RETURNING 1)
      SELECT (SELECT id FROM org) AS org, (SELECT count(*)::int FROM made) AS deliveries`.execute(
      tx,
    );
    const row = rows[0];
    if (!row?.org) throw notFound(`Organization '${orgId}'`);
    if (row.deliveries > 0) await sql`SELECT pg_notify(${WEBHOOKS_CHANNEL}, '')`.execute(tx);
    return row.deliveries;
  });
  return { id, kind: body.kind, createdAt: createdAt.toISOString(), deliveries };
}
