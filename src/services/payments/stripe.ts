/**
 * The Stripe payment provider, on the official SDK. `PIER_STRIPE_API_URL` points the SDK
 * at another base URL (tests: a stand-in on loopback that speaks Stripe's API). Top-ups
 * are Checkout Sessions in payment mode that save the card for off-session use; the
 * signed `checkout.session.completed` event says a top-up is paid; auto-recharges are
 * off-session PaymentIntents, idempotent on the top-up id.
 */
import type Stripe from 'stripe';
import {
  BadSignature,
  type ChargeOutcome,
  type ChargeRequest,
  type CheckoutRequest,
  type PaymentProvider,
  type ProviderEvent,
} from './provider.js';

export interface StripeSettings {
  secretKey: string;
  apiUrl?: string;
  webhookSecret?: string;
}

function clientOptions(apiUrl: string | undefined): Stripe.StripeConfig {
  // Retries carry idempotency keys the SDK adds; a timeout keeps a request from hanging a job.
  const base: Stripe.StripeConfig = { maxNetworkRetries: 2, timeout: 20_000, telemetry: false };
  if (!apiUrl) return base;
  const u = new URL(apiUrl);
  return {
    ...base,
    host: u.hostname,
    port: u.port || (u.protocol === 'https:' ? 443 : 80),
    protocol: u.protocol === 'http:' ? 'http' : 'https',
  };
}

const idOf = (v: string | { id: string } | null | undefined) =>
  v == null ? undefined : typeof v === 'string' ? v : v.id;

export class StripeProvider implements PaymentProvider {
  readonly name = 'stripe';
  private client?: Promise<Stripe>;

  constructor(private readonly settings: StripeSettings) {}

  /**
   * The SDK, loaded on first use: importing it costs over half a second of CPU, which
   * every `pier` start (and every test file) would pay even with payments unused.
   */
  private sdk(): Promise<Stripe> {
    this.client ??= import('stripe').then(
      ({ default: StripeSdk }) =>
        new StripeSdk(this.settings.secretKey, clientOptions(this.settings.apiUrl)),
    );
    return this.client;
  }

  async createCustomer(orgId: string, orgName: string): Promise<string> {
    const c = await (
      await this.sdk()
    ).customers.create(
      { name: orgName, metadata: { orgId } },
      // One customer per organization even if this request is retried.
      { idempotencyKey: `customer-${orgId}` },
    );
    return c.id;
  }

  async createCheckout(req: CheckoutRequest): Promise<{ sessionId: string; url: string }> {
    const metadata = { orgId: req.orgId, topupId: req.topupId };
    const s = await (
      await this.sdk()
    ).checkout.sessions.create(
      {
        mode: 'payment',
        customer: req.customerId,
        client_reference_id: req.topupId,
        line_items: [
          {
            quantity: 1,
            price_data: {
              currency: 'eur',
              unit_amount: req.amountCents,
              product_data: { name: 'Prepaid credit' },
            },
          },
        ],
        payment_intent_data: { setup_future_usage: 'off_session', metadata },
        metadata,
        success_url: req.successUrl,
        cancel_url: req.cancelUrl,
      },
      { idempotencyKey: `checkout-${req.topupId}` },
    );
    if (!s.url) throw new Error('the checkout session has no URL');
    return { sessionId: s.id, url: s.url };
  }

  async charge(req: ChargeRequest): Promise<ChargeOutcome> {
    try {
      const pi = await (
        await this.sdk()
      ).paymentIntents.create(
        {
          amount: req.amountCents,
          currency: 'eur',
          customer: req.customerId,
          payment_method: req.paymentMethodId,
          off_session: true,
          confirm: true,
          metadata: { orgId: req.orgId, topupId: req.topupId },
        },
        { idempotencyKey: `recharge-${req.topupId}` },
      );
      if (pi.status === 'succeeded') return { state: 'paid', paymentIntentId: pi.id };
      if (pi.status === 'processing') return { state: 'processing', paymentIntentId: pi.id };
      return { state: 'failed', reason: `payment ${pi.status}`, paymentIntentId: pi.id };
    } catch (err) {
      // A declined card (or one that needs its holder) is an answer, not an outage.
      // (The SDK's error classes are not imported: it is loaded on first use.)
      const card = err as Partial<Stripe.errors.StripeCardError> | null;
      if (card?.type === 'StripeCardError') {
        return {
          state: 'failed',
          reason: card.code ?? card.message ?? 'card declined',
          paymentIntentId: idOf(card.payment_intent),
        };
      }
      throw err;
    }
  }

  async portalUrl(customerId: string, returnUrl: string): Promise<string> {
    const s = await (
      await this.sdk()
    ).billingPortal.sessions.create({
      customer: customerId,
      return_url: returnUrl,
    });
    return s.url;
  }

  async parseEvent(rawBody: Buffer, signature: string | undefined): Promise<ProviderEvent> {
    const secret = this.settings.webhookSecret;
    if (!secret || !signature) throw new BadSignature('no signature or no webhook secret');
    let event: Stripe.Event;
    try {
      event = (await this.sdk()).webhooks.constructEvent(rawBody, signature, secret);
    } catch (err) {
      throw new BadSignature(err instanceof Error ? err.message : String(err));
    }
    if (event.type === 'payment_intent.succeeded') {
      const pi = event.data.object;
      return {
        id: event.id,
        type: 'charge-paid',
        paymentIntentId: pi.id,
        topupId: pi.metadata?.topupId,
      };
    }
    if (event.type !== 'checkout.session.completed') {
      return { id: event.id, type: 'other', providerType: event.type };
    }
    const session = event.data.object;
    if (session.payment_status !== 'paid') {
      return {
        id: event.id,
        type: 'other',
        providerType: `${event.type}:${session.payment_status}`,
      };
    }
    return {
      id: event.id,
      type: 'checkout-paid',
      sessionId: session.id,
      topupId: session.metadata?.topupId ?? session.client_reference_id ?? undefined,
      customerId: idOf(session.customer),
      paymentMethodId: await this.savedMethodOf(idOf(session.payment_intent)),
    };
  }

  /** The card the checkout saved (setup_future_usage), read off its payment intent. */
  private async savedMethodOf(paymentIntentId: string | undefined): Promise<string | undefined> {
    if (!paymentIntentId) return undefined;
    const pi = await (await this.sdk()).paymentIntents.retrieve(paymentIntentId);
    return idOf(pi.payment_method);
  }
}
