/**
 * The one function that prices usage, for booking and for the preview alike: recorded
 * usage of a period, summed per organization, booking window and usage kind, each sum
 * priced with the list in force at its window's start, exactly, in integer micro-cents
 * (quantity × price, rounded half up to the micro-cent; no floating point).
 *
 * Windows lie on a grid of `windowMs` from the Unix epoch. A window is priced for an
 * organization from `pricedFrom`: the later of the window in which its credit account
 * opened and the first window that starts after the first price list was decided.
 */
import { sql } from 'kysely';
import { USAGE_KINDS, isUsageKind } from '../../contracts/usage-kinds.js';
import type { Executor } from '../../store/db.js';
import { listInForce, type StoredPriceList } from './prices.js';

export type UnpricedReason = 'no-price-list' | 'no-credit-account' | 'before-credit';

export interface PricedUsage {
  orgId: string;
  kind: string;
  windowFrom: Date;
  windowTo: Date;
  /** The recorded quantity, an exact decimal string. */
  quantity: string;
  /** Present when the usage carries a price. */
  priceMicros?: number;
  amountMicros?: bigint;
  unpricedReason?: UnpricedReason;
}

/** Start of the grid window that holds `t`. */
export function windowStart(t: Date, windowMs: number): Date {
  return new Date(Math.floor(t.getTime() / windowMs) * windowMs);
}

/** The first grid boundary at or after `t`. */
export function windowCeil(t: Date, windowMs: number): Date {
  return new Date(Math.ceil(t.getTime() / windowMs) * windowMs);
}

/** quantity × price, rounded half up to the micro-cent, exactly. */
export function priceOf(quantity: string, priceMicros: number): bigint {
  const m = /^(\d+)(?:\.(\d+))?$/.exec(quantity.trim());
  if (!m) throw new Error(`not a non-negative decimal: ${quantity}`);
  const frac = m[2] ?? '';
  const scaled = BigInt(m[1]! + frac);
  const unit = 10n ** BigInt(frac.length);
  return (2n * scaled * BigInt(priceMicros) + unit) / (2n * unit);
}

/** When usage of an organization starts to be priced, or why it never is. */
export function pricedFromOf(
  accountOpened: Date | null,
  lists: StoredPriceList[],
  windowMs: number,
): { pricedFrom?: Date; reason?: UnpricedReason } {
  if (!accountOpened) return { reason: 'no-credit-account' };
  const first = lists[0];
  if (!first) return { reason: 'no-price-list' };
  const a = windowStart(accountOpened, windowMs).getTime();
  const b = windowCeil(first.decidedAt, windowMs).getTime();
  return { pricedFrom: new Date(Math.max(a, b)) };
}

export interface PriceQuery {
  from: Date;
  to: Date;
  windowMs: number;
  lists: StoredPriceList[];
  /** One organization; absent: every organization with a credit account. */
  orgId?: string;
}

/** Recorded usage of [from, to), summed and priced per organization, window and kind. */
export async function priceUsage(ex: Executor, q: PriceQuery): Promise<PricedUsage[]> {
  const rows = await sql<{
    org_id: string;
    kind: string;
    slot: string;
    quantity: string;
    opened: Date | null;
  }>`
    SELECT e.org_id, e.kind, floor(extract(epoch FROM e.at) * 1000 / ${q.windowMs})::text AS slot,
      sum(e.quantity)::text AS quantity, a.created_at AS opened
    FROM usage_events e
    LEFT JOIN credit_accounts a ON a.org_id = e.org_id
    WHERE e.at >= ${q.from} AND e.at < ${q.to}
      AND (${q.orgId ?? null}::text IS NULL OR e.org_id = ${q.orgId ?? null})
      AND (${q.orgId ?? null}::text IS NOT NULL OR a.org_id IS NOT NULL)
    GROUP BY e.org_id, e.kind, slot, a.created_at
    ORDER BY e.org_id, slot, e.kind`.execute(ex);
  return rows.rows.map((r) => {
    const start = Number(r.slot) * q.windowMs;
    const windowFrom = new Date(Math.max(start, q.from.getTime()));
    const windowTo = new Date(Math.min(start + q.windowMs, q.to.getTime()));
    const base = { orgId: r.org_id, kind: r.kind, windowFrom, windowTo, quantity: r.quantity };
    const { pricedFrom, reason } = pricedFromOf(r.opened, q.lists, q.windowMs);
    if (reason) return { ...base, unpricedReason: reason };
    if (start < pricedFrom!.getTime()) return { ...base, unpricedReason: 'before-credit' as const };
    const price = isUsageKind(r.kind)
      ? listInForce(q.lists, new Date(start))?.prices[r.kind]
      : undefined;
    if (price === undefined) return base;
    return { ...base, priceMicros: price, amountMicros: priceOf(r.quantity, price) };
  });
}

/** The unit of a usage kind (`unit` for kinds pier no longer records). */
export function unitOf(kind: string): string {
  return isUsageKind(kind) ? USAGE_KINDS[kind].unit : 'unit';
}
