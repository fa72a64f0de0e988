/**
 * Top-ups through the provider's checkout (spec 4.7): a pending top-up is recorded first
 * (so that the provider's event always finds it), then the checkout session is made on
 * the organization's customer, with the top-up id in its metadata. The card is typed on
 * the provider's page; its signed event credits the account (events.ts, settle.ts). The
 * session returns the payer to the console's billing page, which shows the top-up.
 */
import type { Topup, TopupAnswer } from '../../contracts/billing.js';
import { newId } from '../../crypto/tokens.js';
import { badRequest, notFound } from '../../errors/api-error.js';
import type { ServiceContext } from '../context.js';
import { getCreditAccount } from '../billing.js';
import { ensureCustomer, requireCustomer } from './customer.js';
import { failTopup } from './settle.js';
import { atProvider, requirePaymentProvider } from './index.js';

export const consoleBillingUrl = (ctx: ServiceContext) => `${ctx.config.publicUrl}/console/billing`;

export async function createTopup(
  ctx: ServiceContext,
  orgId: string,
  amountCents: number,
): Promise<TopupAnswer> {
  const account = await getCreditAccount(ctx.db, orgId);
  if (amountCents < account.minTopupCents) {
    throw badRequest([
      { path: 'amountCents', message: `must be at least ${account.minTopupCents} (minTopupCents)` },
    ]);
  }
  const provider = requirePaymentProvider(ctx.config);
  const customerId = await ensureCustomer(ctx, provider, orgId);
  const topupId = newId('top');
  await ctx.db
    .insertInto('topups')
    .values({
      id: topupId,
      org_id: orgId,
      amount_cents: amountCents,
      origin: 'checkout',
      session_id: null,
      payment_intent_id: null,
    })
    .execute();
  const back = `${consoleBillingUrl(ctx)}?topup=${topupId}`;
  const session = await atProvider('create the checkout', () =>
    provider.createCheckout({
      customerId,
      orgId,
      topupId,
      amountCents,
      successUrl: back,
      cancelUrl: `${back}&cancelled=1`,
    }),
  ).catch(async (err: unknown) => {
    // No session: nothing can pay this top-up.
    await ctx.db.transaction().execute((tx) => failTopup(tx, topupId, ctx.clock()));
    throw err;
  });
  await ctx.db
    .updateTable('topups')
    .set({ session_id: session.sessionId })
    .where('id', '=', topupId)
    .execute();
  return { topupId, amountCents, checkoutUrl: session.url, sessionId: session.sessionId };
}

/** A top-up of the organization; another organization's answers like a missing one. */
export async function getTopup(ctx: ServiceContext, orgId: string, id: string): Promise<Topup> {
  const t = await ctx.db
    .selectFrom('topups')
    .selectAll()
    .where('id', '=', id)
    .where('org_id', '=', orgId)
    .executeTakeFirst();
  if (!t) throw notFound('Top-up');
  return {
    topupId: t.id,
    amountCents: t.amount_cents,
    origin: t.origin,
    state: t.state,
    createdAt: t.created_at.toISOString(),
    settledAt: t.settled_at?.toISOString() ?? null,
  };
}

/** A session of the provider's customer portal (cards, receipts), back to the console. */
export async function portalSession(ctx: ServiceContext, orgId: string): Promise<{ url: string }> {
  const customerId = await requireCustomer(ctx.db, orgId);
  const provider = requirePaymentProvider(ctx.config);
  const url = await atProvider('open the portal', () =>
    provider.portalUrl(customerId, consoleBillingUrl(ctx)),
  );
  return { url };
}
