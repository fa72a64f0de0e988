/**
 * The operator's price list (CONTRACT 2 `PUT /admin/v1/prices`): integer micro-cents per
 * unit of each usage kind. Every list is kept: usage is priced with the lists in force
 * while it was used (pricing.ts, pro rata over each event's interval), so a new list
 * applies from the moment it is decided, and past usage is priced the same whenever it is
 * asked.
 */
import type { PriceList, PricesBody } from '../../contracts/billing.js';
import { USAGE_KINDS, USAGE_KIND_NAMES } from '../../contracts/usage-kinds.js';
import { sql } from 'kysely';
import type { Executor } from '../../store/db.js';
import { withUsageLock } from './record.js';

export interface StoredPriceList {
  prices: Record<string, number>;
  decidedAt: Date;
}

const KINDS = USAGE_KIND_NAMES.map((kind) => ({ kind, ...USAGE_KINDS[kind] }));

function answer(list: StoredPriceList | undefined): PriceList {
  return {
    prices: list?.prices ?? {},
    pricesDecided: list !== undefined,
    decidedAt: list?.decidedAt.toISOString() ?? null,
    kinds: KINDS,
  };
}

/** Every price list, oldest first (there are few: one per operator decision). */
export async function priceLists(ex: Executor): Promise<StoredPriceList[]> {
  const rows = await ex
    .selectFrom('price_lists')
    .select(['prices', 'decided_at'])
    .orderBy('decided_at')
    .orderBy('id')
    .execute();
  return rows.map((r) => ({ prices: r.prices, decidedAt: r.decided_at }));
}

/** The list in force at `at`: the newest decided at or before it. */
export function listInForce(lists: StoredPriceList[], at: Date): StoredPriceList | undefined {
  let found: StoredPriceList | undefined;
  for (const l of lists) if (l.decidedAt.getTime() <= at.getTime()) found = l;
  return found;
}

export async function getPriceList(ex: Executor): Promise<PriceList> {
  return answer((await priceLists(ex)).at(-1));
}

/** The kinds that carry a price in the newest list (a price of 0 is a price: free). */
export async function pricedKinds(ex: Executor): Promise<string[]> {
  const newest = (await priceLists(ex)).at(-1);
  return newest ? Object.keys(newest.prices).sort() : [];
}

/**
 * Decides a new list. Its moment is taken as usage's is (record.ts): under the writers'
 * lock, so a booker never books a window that a list committed later would have priced
 * differently; to the millisecond, as the pricing function compares it.
 */
export async function setPrices(ex: Executor, body: PricesBody): Promise<PriceList> {
  const prices = Object.fromEntries(
    Object.entries(body.prices).filter((e): e is [string, number] => e[1] !== undefined),
  );
  const row = await withUsageLock(ex, (tx) =>
    tx
      .insertInto('price_lists')
      .values({
        prices: JSON.stringify(prices),
        decided_at: sql<Date>`date_trunc('milliseconds', clock_timestamp())`,
      })
      .returning(['prices', 'decided_at'])
      .executeTakeFirstOrThrow(),
  );
  return answer({ prices: row.prices, decidedAt: row.decided_at });
}
