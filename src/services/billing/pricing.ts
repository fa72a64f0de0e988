/**
 * The one function that prices usage, for booking, the projected balance and the preview
 * alike: recorded usage of a period, summed per organization, booking window and usage
 * kind. Each event covers an interval (since the previous metering tick) and is priced
 * with the lists in force over it, pro rata to the time under each: a list decided at
 * 10:20 prices exactly the usage from 10:20 on, even the part of a tick that began
 * before it, and the window's sum is made of one part per list in force during it. The
 * amount is exact, in integer micro-cents: the sum over parts of quantity × price as a
 * fraction, rounded half up to the micro-cent once per organization, window and kind; no
 * floating point.
 *
 * Windows lie on a grid of `windowMs` from the Unix epoch. An organization's usage is
 * priced from `pricedFrom`: the later of the start of the window in which its credit
 * account opened and the moment the first price list was decided.
 */
import { sql } from 'kysely';
import { USAGE_KINDS, isUsageKind } from '../../contracts/usage-kinds.js';
import type { Executor } from '../../store/db.js';
import type { ServiceContext } from '../context.js';
import {
  add,
  formatDecimal,
  fraction,
  parseDecimal,
  roundHalfUp,
  times,
  ZERO,
  type Fraction,
} from './exact.js';
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
  /**
   * The priced quantities, one per list in force during the window, oldest first, as
   * decimals for people (`≈` when a share of an event has no finite decimal form).
   */
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

/** quantity × price, rounded half up to the micro-cent, exactly. */
export function priceOf(quantity: string, priceMicros: number): bigint {
  return amountOf([{ quantity, priceMicros }]);
}

/** A quantity as an exact fraction: a decimal string or a fraction already. */
const exactly = (q: string | Fraction): Fraction =>
  typeof q === 'string' ? parseDecimal(q).value : q;

/** Σ quantity × price over `parts`, exactly, rounded half up to the micro-cent once. */
export function amountOf(parts: { quantity: string | Fraction; priceMicros: number }[]): bigint {
  return roundHalfUp(
    parts.reduce(
      (sum, p) => add(sum, times(exactly(p.quantity), fraction(BigInt(p.priceMicros), 1n))),
      ZERO,
    ),
  );
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
}

/** One row of the pricing query: events of one list period, or one event's share of it. */
interface PartRow {
  org_id: string;
  kind: string;
  slot: string;
  /** The list in force (its index in `lists`; -1 before the first one). */
  list: number;
  opened: Date | null;
  /** The event split across lists, or null for the events wholly inside this list's period. */
  split: string | null;
  quantity: string;
  /** A split event: the microseconds of its interval in this list's period, and in all. */
  part_us: string;
  whole_us: string;
}

/** The quantity priced by one list: an exact fraction, and the decimals it was recorded with. */
interface Part {
  list: number;
  quantity: Fraction;
  decimals: number;
}

/**
 * Recorded usage of [from, to) (by the moment each event was recorded, `at`), summed and
 * priced per organization, window and kind. An event measures the interval [since, at)
 * (an event without `since`, recorded before migration 0023 or by hand, is an instant at
 * `at`): its quantity is shared among the lists in force over that interval, pro rata to
 * the microseconds under each. The events lying under one list are summed in the store;
 * the few that straddle a list's moment come back one by one and are split exactly here.
 */
export async function priceUsage(ex: Executor, q: PriceQuery): Promise<PricedUsage[]> {
  // The lists' boundaries as this function knows them: the same milliseconds whoever asks.
  const bounds = q.lists.map((l) => l.decidedAt.toISOString());
  const orgId = q.orgId ?? null;
  const rows = await sql<PartRow>`
    WITH b AS (
      SELECT i::int - 1 AS list, (extract(epoch FROM t) * 1000000)::bigint AS since
        FROM unnest(${bounds}::timestamptz[]) WITH ORDINALITY AS b(t, i)),
    lists AS (
      -- Each list's period in microseconds, [since, until); -1: before the first list.
      SELECT list, since, lead(since) OVER (ORDER BY list) AS until FROM b
      UNION ALL SELECT -1, NULL, (SELECT since FROM b WHERE list = 0)),
    ev AS (
      SELECT e.id, e.org_id, e.kind, e.quantity, a.created_at AS opened,
        floor(extract(epoch FROM e.at) * 1000 / ${q.windowMs})::text AS slot,
        (extract(epoch FROM coalesce(e.since, e.at)) * 1000000)::bigint AS s,
        (extract(epoch FROM e.at) * 1000000)::bigint AS t
      FROM usage_events e
      LEFT JOIN credit_accounts a ON a.org_id = e.org_id
      WHERE e.at >= ${q.from} AND e.at < ${q.to}
        AND (${orgId}::text IS NULL OR e.org_id = ${orgId})
        AND (${orgId}::text IS NOT NULL OR a.org_id IS NOT NULL)),
    parts AS (
      SELECT ev.*, l.list,
        CASE WHEN ev.s = ev.t OR ((l.since IS NULL OR ev.s >= l.since)
                                  AND (l.until IS NULL OR ev.t <= l.until))
             THEN NULL ELSE ev.id::text END AS split,
        least(ev.t, l.until) - greatest(ev.s, l.since) AS part_us
      FROM ev JOIN lists l ON CASE
        -- An instant: the list in force at it.
        WHEN ev.s = ev.t
          THEN (l.since IS NULL OR ev.t >= l.since) AND (l.until IS NULL OR ev.t < l.until)
        -- An interval: every list whose period overlaps it.
        ELSE (l.since IS NULL OR l.since < ev.t) AND (l.until IS NULL OR l.until > ev.s) END)
    SELECT org_id, kind, slot, list, opened, split, sum(quantity)::text AS quantity,
      max(part_us)::text AS part_us, max(t - s)::text AS whole_us
    FROM parts
    GROUP BY org_id, kind, slot, list, opened, split
    ORDER BY org_id, slot, kind, list`.execute(ex);

  const out = new Map<string, { u: PricedUsage; parts: Map<number, Part>; seen: Set<string> }>();
  for (const r of rows.rows) {
    const key = `${r.org_id} ${r.slot} ${r.kind}`;
    let acc = out.get(key);
    if (!acc) {
      const start = Number(r.slot) * q.windowMs;
      const u: PricedUsage = {
        orgId: r.org_id,
        kind: r.kind,
        windowFrom: new Date(Math.max(start, q.from.getTime())),
        windowTo: new Date(Math.min(start + q.windowMs, q.to.getTime())),
        quantity: '0',
      };
      const { pricedFrom, reason } = pricedFromOf(r.opened, q.lists, q.windowMs);
      if (reason) u.unpricedReason = reason;
      else if (start + q.windowMs <= pricedFrom!.getTime()) u.unpricedReason = 'before-credit';
      acc = { u, parts: new Map(), seen: new Set() };
      out.set(key, acc);
    }
    const recorded = parseDecimal(r.quantity);
    // A split event comes once per list it overlaps: its quantity counts once in the total.
    if (r.split === null || !acc.seen.has(r.split)) {
      if (r.split !== null) acc.seen.add(r.split);
      acc.u.quantity = sumDecimals(acc.u.quantity, r.quantity);
    }
    const share =
      r.split === null
        ? recorded.value
        : times(recorded.value, fraction(BigInt(r.part_us), BigInt(r.whole_us)));
    const part = acc.parts.get(r.list) ?? { list: r.list, quantity: ZERO, decimals: 0 };
    part.quantity = add(part.quantity, share);
    part.decimals = Math.max(part.decimals, recorded.decimals);
    acc.parts.set(r.list, part);
  }
  return [...out.values()].map(({ u, parts }) => {
    if (u.unpricedReason || !isUsageKind(u.kind)) return u;
    const kind = u.kind;
    const priced = [...parts.values()]
      .sort((a, b) => a.list - b.list)
      .flatMap((p) => {
        const price = q.lists[p.list]?.prices[kind];
        return price === undefined ? [] : [{ ...p, priceMicros: price }];
      });
    if (priced.length === 0) return u;
    return {
      ...u,
      priceMicros: priced.at(-1)!.priceMicros,
      parts: priced.map((p) => ({
        quantity: formatDecimal(p.quantity, p.decimals),
        priceMicros: p.priceMicros,
      })),
      amountMicros: amountOf(priced),
    };
  });
}

/** The exact sum of two non-negative decimals, as a decimal string. */
function sumDecimals(a: string, b: string): string {
  const x = parseDecimal(a);
  const y = parseDecimal(b);
  return formatDecimal(add(x.value, y.value), Math.max(x.decimals, y.decimals));
}

/** The unit of a usage kind (`unit` for kinds pier no longer records). */
export function unitOf(kind: string): string {
  return isUsageKind(kind) ? USAGE_KINDS[kind].unit : 'unit';
}
