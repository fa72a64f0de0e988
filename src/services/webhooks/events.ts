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
  const deliveries = await ctx.db.transaction().execute(async (tx) => {
    const org = await tx.selectFrom('orgs').select('id').where('id', '=', orgId).executeTakeFirst();
    if (!org) throw notFound(`Organization '${orgId}'`);
    await tx
      .insertInto('webhook_events')
      .values({ id, org_id: orgId, kind: body.kind, payload, created_at: createdAt })
      .execute();
    const targets = await tx
      .selectFrom('webhooks')
      .select('id')
      .where('org_id', '=', orgId)
      .where('enabled', '=', true)
      .where(sql<boolean>`${body.kind} = ANY(events)`)
      .execute();
    if (targets.length === 0) return 0;
    await tx
      .insertInto('webhook_deliveries')
      .values(
        targets.map((w) => ({
          id: newId('whd'),
          webhook_id: w.id,
          event_id: id,
          org_id: orgId,
          next_attempt_at: sql<Date>`now()` as unknown as Date,
          locked_by: null,
          locked_until: null,
          response_status: null,
          error: null,
          finished_at: null,
        })),
      )
      .execute();
    await sql`SELECT pg_notify(${WEBHOOKS_CHANNEL}, '')`.execute(tx);
    return targets.length;
  });
  return { id, kind: body.kind, createdAt: createdAt.toISOString(), deliveries };
}
