/**
 * Billing (spec 2.9 credit account, 4.7 billing and usage): the credit account, its ledger,
 * metered usage, and the operator's credit grant (CONTRACT 2).
 */
import { z } from 'zod';
import { USAGE_KIND_NAMES, type UsageKind } from './usage-kinds.js';

export const creditAccountSchema = z.object({
  orgId: z.string(),
  currency: z.literal('EUR'),
  prepaid: z.boolean(),
  balanceMicros: z.string(),
  balanceCents: z.number().int(),
  blocked: z.boolean(),
  blockedAt: z.string().nullable(),
  warned: z.boolean(),
  warnAtPercent: z.number().int(),
  minTopupCents: z.number().int(),
  priced: z.array(z.string()),
  autoRecharge: z.object({
    enabled: z.boolean(),
    thresholdCents: z.number().int(),
    amountCents: z.number().int(),
    capCents: z.number().int(),
    pending: z.boolean(),
    failedAt: z.string().nullable(),
    hasPaymentMethod: z.boolean(),
  }),
});
export type CreditAccount = z.infer<typeof creditAccountSchema>;

/** Operator API: grant credit to an organization. */
export const grantBody = z.strictObject({
  amountCents: z.number().int().min(1).max(1e12),
  reason: z.string().min(1).max(500).optional(),
});
export type GrantBody = z.output<typeof grantBody>;

export const LEDGER_KINDS = ['topup', 'usage', 'grant', 'refund', 'adjustment'] as const;
export type LedgerKind = (typeof LEDGER_KINDS)[number];

export const ledgerEntrySchema = z.object({
  id: z.string(),
  kind: z.enum(LEDGER_KINDS),
  amountMicros: z.string(),
  amountCents: z.number().int(),
  reference: z.string().nullable(),
  windowFrom: z.string().nullable(),
  windowTo: z.string().nullable(),
  detail: z.string().nullable(),
  at: z.string(),
});
export type LedgerEntry = z.infer<typeof ledgerEntrySchema>;

export const ledgerQuery = z.strictObject({
  limit: z.coerce.number().int().min(1).max(500).default(50),
});

export const ledgerPageSchema = z.object({
  orgId: z.string(),
  currency: z.literal('EUR'),
  limit: z.number(),
  entries: z.array(ledgerEntrySchema),
});
export type LedgerPage = z.infer<typeof ledgerPageSchema>;

export const usageQuery = z.strictObject({
  from: z.iso.datetime({ offset: true }).optional(),
  to: z.iso.datetime({ offset: true }).optional(),
});
export type UsageQuery = z.infer<typeof usageQuery>;

export const usageListSchema = z.object({
  period: z.object({ from: z.string(), to: z.string() }),
  events: z.array(
    z.object({
      id: z.string(),
      orgId: z.string(),
      kind: z.string(),
      quantity: z.number(),
      at: z.string(),
    }),
  ),
  truncated: z.boolean(),
  limit: z.number(),
});
export type UsageList = z.infer<typeof usageListSchema>;

/**
 * Operator API: the price list, integer micro-cents per unit of each usage kind
 * (services/billing/kinds.ts). A kind left out carries no price.
 */
export const MAX_PRICE_MICROS = 1e12;
const price = z.number().int().min(0).max(MAX_PRICE_MICROS);
export const pricesBody = z.strictObject({
  // Known kinds only: an unknown one is reported at its own path, with every other issue.
  prices: z.strictObject(
    Object.fromEntries(USAGE_KIND_NAMES.map((k) => [k, price.optional()])) as Record<
      UsageKind,
      z.ZodOptional<typeof price>
    >,
  ),
});
export type PricesBody = z.output<typeof pricesBody>;

export const priceListSchema = z.object({
  prices: z.record(z.string(), z.number().int()),
  pricesDecided: z.boolean(),
  decidedAt: z.string().nullable(),
  kinds: z.array(z.object({ kind: z.string(), unit: z.string(), counts: z.string() })),
});
export type PriceList = z.infer<typeof priceListSchema>;

export const previewQuery = z.strictObject({
  from: z.iso.datetime({ offset: true }),
  to: z.iso.datetime({ offset: true }),
});
export type PreviewQuery = z.infer<typeof previewQuery>;

export const previewSchema = z.object({
  orgId: z.string(),
  currency: z.literal('EUR'),
  from: z.string(),
  to: z.string(),
  lines: z.array(
    z.object({
      kind: z.string(),
      unit: z.string(),
      quantity: z.number(),
      priced: z.boolean(),
      /** The price in force at the end of the period, micro-cents per unit. */
      priceMicros: z.number().int().optional(),
      /** Cents, exact to the micro-cent. */
      amount: z.number().optional(),
      amountMicros: z.string().optional(),
    }),
  ),
  total: z.number().min(0).optional(),
  totalMicros: z.string().optional(),
  pricesDecided: z.boolean(),
  pricedFrom: z.string().optional(),
  unpricedReason: z.enum(['no-price-list', 'no-credit-account', 'before-credit']).optional(),
});
export type Preview = z.infer<typeof previewSchema>;

/** Largest single top-up or auto-recharge amount: €100,000. */
export const MAX_TOPUP_CENTS = 10_000_000;
const cents = z.number().int().min(0);

/** POST /v1/billing/topups (console admin). */
export const topupBody = z.strictObject({
  amountCents: z.number().int().min(1).max(MAX_TOPUP_CENTS),
});
export type TopupBody = z.output<typeof topupBody>;

export const topupAnswerSchema = z.object({
  topupId: z.string(),
  amountCents: z.number().int(),
  checkoutUrl: z.string(),
  sessionId: z.string(),
});
export type TopupAnswer = z.infer<typeof topupAnswerSchema>;

/** GET /v1/billing/topups/:id (pier): where a top-up stands, for the console's return page. */
export const topupSchema = z.object({
  topupId: z.string(),
  amountCents: z.number().int(),
  origin: z.enum(['checkout', 'auto-recharge']),
  state: z.enum(['pending', 'paid', 'failed']),
  createdAt: z.string(),
  settledAt: z.string().nullable(),
});
export type Topup = z.infer<typeof topupSchema>;

/** PUT /v1/billing/auto-recharge (console admin). */
/** `GET /v1/billing/topups/:id`: a top-up id (`top_…`). */
export const topupParams = z.strictObject({ id: z.string().max(100) });

export const autoRechargeBody = z.strictObject({
  enabled: z.boolean(),
  thresholdCents: cents.max(MAX_TOPUP_CENTS).default(0),
  amountCents: cents.max(MAX_TOPUP_CENTS).default(0),
  capCents: cents.max(1_000_000_000).default(0),
});
export type AutoRechargeBody = z.output<typeof autoRechargeBody>;

export const portalAnswerSchema = z.object({ url: z.string() });

/** What the payment provider's event route answers once an event is taken (or ignored). */
export const providerEventAnswerSchema = z.object({ received: z.literal(true) });
