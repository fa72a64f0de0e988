/**
 * The provider's signed events (POST /v1/billing/stripe/events). The signature is the
 * authentication; a bad or stale one is refused (400 `bad-signature`). Each event is
 * handled in one transaction with the record of its id, so a replayed event does
 * nothing, and a paid checkout credits its top-up through settle.ts, which credits a
 * top-up once whatever events name it. A paid checkout also remembers the card it saved
 * for auto-recharge. Events of other types, and events about top-ups pier does not know
 * (or whose session does not match), are acknowledged and ignored.
 */
import { ApiError } from '../../errors/api-error.js';
import type { Tx } from '../../store/db.js';
import type { ServiceContext } from '../context.js';
import { requirePaymentProvider } from './index.js';
import { BadSignature, type ProviderEvent } from './provider.js';
import { settleTopup } from './settle.js';
import { windowMsOf } from '../billing/pricing.js';

export async function receiveProviderEvent(
  ctx: ServiceContext,
  rawBody: Buffer,
  signature: string | undefined,
): Promise<{ received: true }> {
  const provider = requirePaymentProvider(ctx.config);
  let event: ProviderEvent;
  try {
    event = await provider.parseEvent(rawBody, signature);
  } catch (err) {
    if (!(err instanceof BadSignature)) throw err;
    throw new ApiError('bad-signature', `The event's signature does not hold: ${err.message}`);
  }
  await ctx.db.transaction().execute(async (tx) => {
    const fresh = await tx
      .insertInto('provider_events')
      .values({ id: event.id, type: event.type === 'other' ? event.providerType : event.type })
      .onConflict((oc) => oc.column('id').doNothing())
      .returning('id')
      .executeTakeFirst();
    if (!fresh) return; // seen before: already handled
    await act(ctx, tx, event);
  });
  return { received: true };
}

async function act(ctx: ServiceContext, tx: Tx, event: ProviderEvent): Promise<void> {
  if (event.type === 'other' || !event.topupId) return;
  const at = ctx.clock();
  const windowMs = windowMsOf(ctx);
  if (event.type === 'charge-paid') {
    const t = await tx
      .selectFrom('topups')
      .select('id')
      .where('id', '=', event.topupId)
      .where('origin', '=', 'auto-recharge')
      .executeTakeFirst();
    if (t)
      await settleTopup(tx, { id: t.id, at, windowMs, paymentIntentId: event.paymentIntentId });
    return;
  }
  const t = await tx
    .selectFrom('topups')
    .select(['id', 'org_id'])
    .where('id', '=', event.topupId)
    .where('session_id', '=', event.sessionId)
    .executeTakeFirst();
  if (!t) {
    ctx.log.warn(
      { event: event.id, session: event.sessionId },
      'a paid checkout of no known top-up',
    );
    return;
  }
  await settleTopup(tx, { id: t.id, at, windowMs });
  if (event.paymentMethodId) {
    await tx
      .updateTable('payment_accounts')
      .set({ payment_method_id: event.paymentMethodId })
      .where('org_id', '=', t.org_id)
      .execute();
  }
}
