/** Rows of webhooks and deliveries as the API shows them; lookups scoped by organization. */
import type {
  Delivery,
  DeliveryAttempt,
  Webhook,
  WebhookEventKind,
} from '../../contracts/webhooks.js';
import { notFound } from '../../errors/api-error.js';
import type { Executor } from '../../store/db.js';

/** Where the dispatcher listens: emitting an event notifies it inside its transaction. */
export const WEBHOOKS_CHANNEL = 'pier_webhooks';

/** The secret box's binding: a sealed secret copied to another webhook does not open. */
export function secretBinding(webhookId: string): string {
  return `webhook:${webhookId}`;
}

const WEBHOOK_COLUMNS = [
  'id',
  'url',
  'events',
  'enabled',
  'disabled_reason',
  'disabled_at',
  'created_at',
] as const;

interface WebhookRow {
  id: string;
  url: string;
  events: string[];
  enabled: boolean;
  disabled_reason: string | null;
  disabled_at: Date | null;
  created_at: Date;
}

export function toWebhook(r: WebhookRow): Webhook {
  return {
    id: r.id,
    url: r.url,
    events: r.events as WebhookEventKind[],
    enabled: r.enabled,
    ...(r.disabled_reason ? { disabledReason: r.disabled_reason } : {}),
    ...(r.disabled_at ? { disabledAt: r.disabled_at.toISOString() } : {}),
    createdAt: r.created_at.toISOString(),
  };
}

export async function listWebhookRows(ex: Executor, orgId: string): Promise<Webhook[]> {
  const rows = await ex
    .selectFrom('webhooks')
    .select(WEBHOOK_COLUMNS)
    .where('org_id', '=', orgId)
    .orderBy('created_at')
    .orderBy('id')
    .execute();
  return rows.map(toWebhook);
}

/** The organization's webhook; another organization's answers exactly like a missing one. */
export async function findWebhook(ex: Executor, orgId: string, id: string): Promise<Webhook> {
  const row = await ex
    .selectFrom('webhooks')
    .select(WEBHOOK_COLUMNS)
    .where('org_id', '=', orgId)
    .where('id', '=', id)
    .executeTakeFirst();
  if (!row) throw notFound(`Webhook '${id}'`);
  return toWebhook(row);
}

/** The newest `limit` deliveries of a webhook, each with every attempt. */
export async function deliveryRows(
  ex: Executor,
  webhookId: string,
  limit: number,
): Promise<Delivery[]> {
  const rows = await ex
    .selectFrom('webhook_deliveries as d')
    .innerJoin('webhook_events as e', 'e.id', 'd.event_id')
    .select([
      'd.id',
      'd.webhook_id',
      'd.event_id',
      'e.kind',
      'd.status',
      'd.created_at',
      'd.next_attempt_at',
      'd.finished_at',
      'd.response_status',
      'd.error',
    ])
    .where('d.webhook_id', '=', webhookId)
    .orderBy('d.created_at', 'desc')
    .orderBy('d.id', 'desc')
    .limit(limit)
    .execute();
  if (rows.length === 0) return [];
  const attempts = await ex
    .selectFrom('webhook_attempts')
    .selectAll()
    .where(
      'delivery_id',
      'in',
      rows.map((r) => r.id),
    )
    .orderBy('attempt')
    .execute();
  const byDelivery = new Map<string, DeliveryAttempt[]>();
  for (const a of attempts) {
    const list = byDelivery.get(a.delivery_id) ?? [];
    list.push({
      attempt: a.attempt,
      at: a.started_at.toISOString(),
      durationMs: a.duration_ms,
      ...(a.response_status !== null ? { responseStatus: a.response_status } : {}),
      ...(a.error !== null ? { error: a.error } : {}),
      outcome: a.outcome,
      ...(a.next_attempt_at ? { nextAttemptAt: a.next_attempt_at.toISOString() } : {}),
    });
    byDelivery.set(a.delivery_id, list);
  }
  return rows.map((r) => ({
    id: r.id,
    webhookId: r.webhook_id,
    eventId: r.event_id,
    type: r.kind as WebhookEventKind,
    status: r.status,
    createdAt: r.created_at.toISOString(),
    ...(r.status === 'pending' && r.next_attempt_at
      ? { nextAttemptAt: r.next_attempt_at.toISOString() }
      : {}),
    ...(r.finished_at ? { finishedAt: r.finished_at.toISOString() } : {}),
    ...(r.response_status !== null ? { responseStatus: r.response_status } : {}),
    ...(r.error !== null ? { error: r.error } : {}),
    attempts: byDelivery.get(r.id) ?? [],
  }));
}
