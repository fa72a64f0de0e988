/**
 * Webhooks (spec 4.11, 6 events, 8 limits; docs/webhooks.md for what the spec leaves
 * open): the create body, the webhook record (its secret only in the create answer), the
 * delivery record with its attempts, and the operator's mail event (CONTRACT 2).
 */
import { z } from 'zod';

/** The only kinds `events` accepts (spec 6). */
export const WEBHOOK_EVENT_KINDS = [
  'email.sent',
  'email.delivered',
  'email.delivery_delayed',
  'email.bounced',
  'email.complained',
  'email.failed',
  'email.received',
] as const;
export type WebhookEventKind = (typeof WEBHOOK_EVENT_KINDS)[number];

export const webhookEventKindSchema = z.enum(WEBHOOK_EVENT_KINDS);

export const createWebhookBody = z.strictObject({
  url: z
    .string()
    .min(1)
    .max(2048)
    .refine((u) => URL.canParse(u) && /^https?:$/.test(new URL(u).protocol), {
      message: 'must be an http or https URL',
    }),
  events: z.array(webhookEventKindSchema).min(1).max(WEBHOOK_EVENT_KINDS.length),
});
export type CreateWebhookBody = z.infer<typeof createWebhookBody>;

export const webhookSchema = z.object({
  id: z.string(),
  url: z.string(),
  events: z.array(webhookEventKindSchema),
  /** False once the endpoint answered 410 Gone; nothing is sent to it after that. */
  enabled: z.boolean(),
  disabledReason: z.string().optional(),
  disabledAt: z.string().optional(),
  createdAt: z.string(),
});
export type Webhook = z.infer<typeof webhookSchema>;

export const webhookListSchema = z.array(webhookSchema);

/** The create answer: the record and the signing secret (`whsec_…`), shown only here. */
export const createdWebhookSchema = webhookSchema.extend({ secret: z.string() });
export type CreatedWebhook = z.infer<typeof createdWebhookSchema>;

export const webhookIdParams = z.object({ id: z.string().max(64) });

export const deliveriesQuery = z.strictObject({
  limit: z.coerce.number().int().min(1).max(100).default(20),
});

export const DELIVERY_STATUSES = ['pending', 'succeeded', 'failed', 'cancelled'] as const;

/** One try of a delivery, as it ended. */
export const deliveryAttemptSchema = z.object({
  attempt: z.number(),
  at: z.string(),
  durationMs: z.number(),
  /** The endpoint's HTTP status, when it answered. */
  responseStatus: z.number().optional(),
  /** Why the try failed, when it did (timeout, refused target, connection error, status). */
  error: z.string().optional(),
  /** `retry`: failed, another try is scheduled; `disabled`: 410, the webhook is off. */
  outcome: z.enum(['succeeded', 'retry', 'failed', 'disabled']),
  nextAttemptAt: z.string().optional(),
});

export const deliverySchema = z.object({
  id: z.string(),
  webhookId: z.string(),
  /** The `webhook-id` header: the same on every try (receivers deduplicate on it). */
  eventId: z.string(),
  type: webhookEventKindSchema,
  status: z.enum(DELIVERY_STATUSES),
  createdAt: z.string(),
  nextAttemptAt: z.string().optional(),
  finishedAt: z.string().optional(),
  /** The last try's status and error, when there was one. */
  responseStatus: z.number().optional(),
  error: z.string().optional(),
  attempts: z.array(deliveryAttemptSchema),
});
export type Delivery = z.infer<typeof deliverySchema>;
export type DeliveryAttempt = z.infer<typeof deliveryAttemptSchema>;

export const deliveryListSchema = z.array(deliverySchema);

/** `POST /admin/v1/orgs/:id/mail-events` (CONTRACT 2): what the mail system would report. */
export const mailEventBody = z.strictObject({
  kind: webhookEventKindSchema,
  data: z.record(z.string(), z.unknown()),
});
export type MailEventBody = z.infer<typeof mailEventBody>;

export const mailEventAnswerSchema = z.object({
  id: z.string(),
  kind: webhookEventKindSchema,
  createdAt: z.string(),
  /** How many deliveries were scheduled (one per enabled webhook of the org for the kind). */
  deliveries: z.number(),
});
export type MailEventAnswer = z.infer<typeof mailEventAnswerSchema>;
