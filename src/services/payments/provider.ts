/**
 * What pier asks of a payment provider (docs/billing.md). Card data never crosses pier:
 * a top-up is paid on the provider's own page (a checkout session), the provider tells
 * pier by a signed event, and the payment method it saved there pays auto-recharges off
 * session. One implementation: Stripe (stripe.ts); tests run it against a stand-in.
 */

export interface CheckoutRequest {
  customerId: string;
  orgId: string;
  topupId: string;
  amountCents: number;
  successUrl: string;
  cancelUrl: string;
}

export interface ChargeRequest {
  customerId: string;
  paymentMethodId: string;
  orgId: string;
  topupId: string;
  amountCents: number;
}

/** A charge the provider answered: paid, refused (a declined card), or still in flight. */
export type ChargeOutcome =
  | { state: 'paid'; paymentIntentId: string }
  | { state: 'failed'; reason: string; paymentIntentId?: string }
  | { state: 'processing'; paymentIntentId: string };

/** The provider events pier acts on; anything else is `other` and ignored. */
export type ProviderEvent =
  | {
      id: string;
      type: 'checkout-paid';
      sessionId: string;
      topupId: string | undefined;
      customerId: string | undefined;
      /** The payment method the provider saved for later (off-session) charges. */
      paymentMethodId: string | undefined;
    }
  | {
      /** An off-session charge that was still processing when pier asked has succeeded. */
      id: string;
      type: 'charge-paid';
      paymentIntentId: string;
      topupId: string | undefined;
    }
  | { id: string; type: 'other'; providerType: string };

export interface PaymentProvider {
  readonly name: string;
  createCustomer(orgId: string, orgName: string): Promise<string>;
  createCheckout(req: CheckoutRequest): Promise<{ sessionId: string; url: string }>;
  /** Idempotent on the top-up id: a retry after a crash never charges twice. */
  charge(req: ChargeRequest): Promise<ChargeOutcome>;
  portalUrl(customerId: string, returnUrl: string): Promise<string>;
  /** Verifies the signature; throws BadSignature when it does not hold. */
  parseEvent(rawBody: Buffer, signature: string | undefined): Promise<ProviderEvent>;
}

export class BadSignature extends Error {}
