/**
 * The organization's customer at the payment provider: created on its first top-up and
 * remembered (payment_accounts), so that every later top-up, saved card and portal visit
 * belongs to the same customer. The provider call carries an idempotency key per
 * organization, so two first top-ups at once still make one customer.
 */
import { sql } from 'kysely';
import { ApiError } from '../../errors/api-error.js';
import type { Executor } from '../../store/db.js';
import type { ServiceContext } from '../context.js';
import { atProvider } from './index.js';
import type { PaymentProvider } from './provider.js';

export async function customerOf(ex: Executor, orgId: string): Promise<string | undefined> {
  const row = await ex
    .selectFrom('payment_accounts')
    .select('customer_id')
    .where('org_id', '=', orgId)
    .executeTakeFirst();
  return row?.customer_id ?? undefined;
}

export async function ensureCustomer(
  ctx: ServiceContext,
  provider: PaymentProvider,
  orgId: string,
): Promise<string> {
  const known = await customerOf(ctx.db, orgId);
  if (known) return known;
  const org = await ctx.db
    .selectFrom('orgs')
    .select('name')
    .where('id', '=', orgId)
    .executeTakeFirstOrThrow();
  const made = await atProvider('create the customer', () =>
    provider.createCustomer(orgId, org.name),
  );
  const row = await ctx.db
    .insertInto('payment_accounts')
    .values({ org_id: orgId, customer_id: made, payment_method_id: null })
    .onConflict((oc) =>
      oc
        .column('org_id')
        .doUpdateSet({ customer_id: sql`COALESCE(payment_accounts.customer_id, ${made})` }),
    )
    .returning('customer_id')
    .executeTakeFirstOrThrow();
  return row.customer_id ?? made;
}

export async function requireCustomer(ex: Executor, orgId: string): Promise<string> {
  const id = await customerOf(ex, orgId);
  if (!id) {
    throw new ApiError(
      'no-customer',
      'This organization has no payment relationship yet: its first top-up creates one.',
    );
  }
  return id;
}
