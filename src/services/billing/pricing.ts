/**
 * The one function that prices usage, for booking, the projected balance and the preview
 * alike: recorded usage of a period, summed per organization, booking window and usage
 * kind. Each event is priced with the list in force at the moment it was recorded, so a
 * list decided at 10:20 prices the usage recorded from 10:20 on, and the window's sum is
 * made of one part per list in force during it (pro rata). The amount is exact, in integer
 * micro-cents: the sum over parts of quantity × price, rounded half up to the micro-cent
 * once per organization, window and kind; no floating point.
 *
 * Windows lie on a grid of `windowMs` from the Unix epoch. An organization's usage is
 * priced from `pricedFrom`: the later of the start of the window in which its credit
 * account opened and the moment the first price list was decided.
 */
import { sql } from 'kysely';
import { USAGE_KINDS, isUsageKind } from '../../contracts/usage-kinds.js';
import type { Executor } from '../../store/db.js';
import type { ServiceContext } from '../context.js';
import type { StoredPriceList } from './prices.js';

export type UnpricedReason = 'no-price-list' | 'no-credit-account' | 'before-credit';

export interface PricedUsage {
  orgId: string;
  kind: string;
  windowFrom: Date;
  windowTo: Date;
  /** The recorded quantity, an exact decimal string. */
  quantity: string;
  /** Present when the usage carries a price: that of the newest list priced in the window. */
  priceMicros?: number;
  /** The priced quantities, one per list in force during the window, oldest first. */
  parts?: { quantity: string; priceMicros: number }[];
  amountMicros?: bigint;
  unpricedReason?: UnpricedReason;
}

/** The length of a booking window (`PIER_BILLING_WINDOW_SECONDS`). */
export function windowMsOf(ctx: Pick<ServiceContext, 'config'>): number {
  return ctx.config.billingWindowSeconds * 1000;
}

/** Start of the grid window that holds `t`. */
export function windowStart(t: Date, windowMs: number): Date {
  return new Date(Math.floor(t.getTime() / windowMs) * windowMs);
}

/** A non-negative decimal as an integer and its number of decimals. */
function decimal(quantity: string): { scaled: bigint; decimals: number } {
  const m = /^(\d+)(?:\.(\d+))?$/.exec(quantity.trim());
  if (!m) throw new Error(`not a non-negative decimal: ${quantity}`);
  const frac = m[2] ?? '';
  return { scaled: BigInt(m[1]! + frac), decimals: frac.length };
}

/** quantity × price, rounded half up to the micro-cent, exactly. */
export function priceOf(quantity: string, priceMicros: number): bigint {
  return amountOf([{ quantity, priceMicros }]);
}

/** Σ quantity × price over `parts`, exactly, rounded half up to the micro-cent once. */
export function amountOf(parts: { quantity: string; priceMicros: number }[]): bigint {
  const terms = parts.map((p) => ({ ...decimal(p.quantity), price: BigInt(p.priceMicros) }));
  const decimals = Math.max(0, ...terms.map((t) => t.decimals));
  const unit = 10n ** BigInt(decimals);
  const sum = terms.reduce(
    (n, t) => n + t.scaled * 10n ** BigInt(decimals - t.decimals) * t.price,
    0n,
  );
  return (2n * sum + unit) / (2n * unit);
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
  return { pricedFrom: new Date(Math.max(a, first.decidedAt.getTime())) };
}

export interface PriceQuery {
  from: Date;
  to: Date;
  windowMs: number;
  lists: StoredPriceList[];
  /** One organization; absent: every organization with a credit account. */
  orgId?: string;
  /** Only organizations whose credit is not blocked (the projected balance's check). */
  openOnly?: boolean;
}

/**
 * Recorded usage of [from, to), summed and priced per organization, window and kind.
 * Events are summed per list period too (the index of the list in force when each was
 * recorded; -1 before the first list), so each part is priced by its own list.
 */
export async function priceUsage(ex: Executor, q: PriceQuery): Promise<PricedUsage[]> {
  // The lists' boundaries as this function knows them: the same milliseconds whoever asks.
  const bounds = q.lists.map((l) => l.decidedAt.toISOString());
  const rows = await sql<{
    org_id: string;
    kind: string;
    slot: string;
    list: number;
    quantity: string;
    opened: Date | null;
  }>`
    WITH lists AS (
      SELECT i::int - 1 AS list, t AS since, lead(t) OVER (ORDER BY i) AS until
        FROM unnest(${bounds}::timestamptz[]) WITH ORDINALITY AS b(t, i))
    SELECT e.org_id, e.kind, floor(extract(epoch FROM e.at) * 1000 / ${q.windowMs})::text AS slot,
      coalesce(l.list, -1) AS list, sum(e.quantity)::text AS quantity, a.created_at AS opened
    FROM usage_events e
    LEFT JOIN credit_accounts a ON a.org_id = e.org_id
    LEFT JOIN lists l ON e.at >= l.since AND (l.until IS NULL OR e.at < l.until)
    WHERE e.at >= ${q.from} AND e.at < ${q.to}
      AND (${q.orgId ?? null}::text IS NULL OR e.org_id = ${q.orgId ?? null})
      AND (${q.orgId ?? null}::text IS NOT NULL OR a.org_id IS NOT NULL)
      AND (NOT ${q.openOnly ?? false} OR a.blocked_at IS NULL)
    GROUP BY e.org_id, e.kind, slot, l.list, a.created_at
    ORDER BY e.org_id, slot, e.kind, list`.execute(ex);
  const out = new Map<string, PricedUsage>();
  for (const r of rows.rows) {
    const key = `${r.org_id} ${r.slot} ${r.kind}`;
    const start = Number(r.slot) * q.windowMs;
    let u = out.get(key);
    if (!u) {
      u = {
        orgId: r.org_id,
        kind: r.kind,
        windowFrom: new Date(Math.max(start, q.from.getTime())),
        windowTo: new Date(Math.min(start + q.windowMs, q.to.getTime())),
        quantity: '0',
      };
      const { pricedFrom, reason } = pricedFromOf(r.opened, q.lists, q.windowMs);
      if (reason) u.unpricedReason = reason;
      else if (start + q.windowMs <= pricedFrom!.getTime()) u.unpricedReason = 'before-credit';
      out.set(key, u);
    }
    u.quantity = addDecimals(u.quantity, r.quantity);
    const price = isUsageKind(r.kind) ? q.lists[r.list]?.prices[r.kind] : undefined;
    if (u.unpricedReason || price === undefined) continue;
    u.parts = [...(u.parts ?? []), { quantity: r.quantity, priceMicros: price }];
    u.priceMicros = price;
    u.amountMicros = amountOf(u.parts);
  }
  return [...out.values()];
}

/** The exact sum of two non-negative decimals, as a decimal string. */
function addDecimals(a: string, b: string): string {
  const x = decimal(a);
  const y = decimal(b);
  const decimals = Math.max(x.decimals, y.decimals);
  const sum =
    x.scaled * 10n ** BigInt(decimals - x.decimals) +
    y.scaled * 10n ** BigInt(decimals - y.decimals);
  const digits = sum.toString().padStart(decimals + 1, '0');
  return decimals === 0 ? digits : `${digits.slice(0, -decimals)}.${digits.slice(-decimals)}`;
}

/** The unit of a usage kind (`unit` for kinds pier no longer records). */
export function unitOf(kind: string): string {
  return isUsageKind(kind) ? USAGE_KINDS[kind].unit : 'unit';
}
