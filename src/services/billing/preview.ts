/**
 * The preview (spec 2.9, 4.7 `GET /v1/billing/preview`): what the usage of any period
 * costs, priced by the function that books (pricing.ts), per booking window and kind. A
 * period of whole windows therefore previews exactly what was (or will be) booked for it.
 */
import type { Preview } from '../../contracts/billing.js';
import { USAGE_KIND_NAMES } from '../../contracts/usage-kinds.js';
import { badRequest } from '../../errors/api-error.js';
import type { ServiceContext } from '../context.js';
import { listInForce, priceLists } from './prices.js';
import { priceUsage, pricedFromOf, unitOf, windowMsOf } from './pricing.js';

/** Micro-cents as cents, exact to the micro-cent (a JSON number). */
const cents = (micros: bigint) => Number(micros) / 1e6;

export async function previewOf(
  ctx: ServiceContext,
  orgId: string,
  from: Date,
  to: Date,
): Promise<Preview> {
  if (from > to) throw badRequest([{ path: 'from', message: 'must not be after to' }]);
  const windowMs = windowMsOf(ctx);
  const lists = await priceLists(ctx.db);
  const account = await ctx.db
    .selectFrom('credit_accounts')
    .select('created_at')
    .where('org_id', '=', orgId)
    .executeTakeFirst();
  const usage = await priceUsage(ctx.db, { from, to, windowMs, lists, orgId });
  const { pricedFrom, reason } = pricedFromOf(account?.created_at ?? null, lists, windowMs);
  const unpriced = reason ?? (pricedFrom! >= to ? 'before-credit' : undefined);
  // The price of each kind shown: the list in force at the period's end.
  const last = unpriced ? undefined : listInForce(lists, new Date(to.getTime() - 1));

  // Every kind, and kinds recorded once that pier no longer knows.
  const kinds = [...new Set<string>([...USAGE_KIND_NAMES, ...usage.map((u) => u.kind)])];
  let total = 0n;
  const lines = kinds.map((kind) => {
    const mine = usage.filter((u) => u.kind === kind);
    const quantity = mine.reduce((n, u) => n + Number(u.quantity), 0);
    const price = last?.prices[kind];
    const amounts = mine.filter((u) => u.amountMicros !== undefined);
    const priced = price !== undefined || amounts.length > 0;
    const line: Preview['lines'][number] = {
      kind,
      unit: unitOf(kind),
      quantity: Number(quantity.toFixed(9)),
      priced,
    };
    if (!priced) return line;
    const amount = amounts.reduce((n, u) => n + u.amountMicros!, 0n);
    total += amount;
    return {
      ...line,
      ...(price !== undefined ? { priceMicros: price } : {}),
      amount: cents(amount),
      amountMicros: amount.toString(),
    };
  });
  return {
    orgId,
    currency: 'EUR',
    from: from.toISOString(),
    to: to.toISOString(),
    lines,
    ...(unpriced ? {} : { total: cents(total), totalMicros: total.toString() }),
    pricesDecided: lists.length > 0,
    ...(pricedFrom ? { pricedFrom: pricedFrom.toISOString() } : {}),
    ...(unpriced ? { unpricedReason: unpriced } : {}),
  };
}
