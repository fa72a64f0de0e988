/**
 * Billing (spec 2.9 credit account, 4.7 billing and usage): the credit account, its ledger,
 * metered usage, and the operator's credit grant (CONTRACT 2).
 */
import { z } from 'zod';

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
