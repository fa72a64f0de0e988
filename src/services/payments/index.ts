/**
 * The installation's payment provider, made from its settings on first use (one per
 * configuration): Stripe when `PIER_STRIPE_SECRET_KEY` is set, otherwise none, and the
 * payment routes say so (503 `payments-unavailable`; operators grant credit instead).
 */
import type { Config } from '../../config.js';
import { ApiError } from '../../errors/api-error.js';
import type { PaymentProvider } from './provider.js';
import { StripeProvider } from './stripe.js';

const made = new WeakMap<Config, PaymentProvider | null>();

export function paymentProviderOf(config: Config): PaymentProvider | undefined {
  let p = made.get(config);
  if (p === undefined) {
    p = config.stripeSecretKey
      ? new StripeProvider({
          secretKey: config.stripeSecretKey,
          apiUrl: config.stripeApiUrl,
          webhookSecret: config.stripeWebhookSecret,
        })
      : null;
    made.set(config, p);
  }
  return p ?? undefined;
}

export function requirePaymentProvider(config: Config): PaymentProvider {
  const p = paymentProviderOf(config);
  if (!p) {
    throw new ApiError(
      'payments-unavailable',
      'This installation has no payment provider (PIER_STRIPE_SECRET_KEY is not set): the operator grants credit through the operator API.',
    );
  }
  return p;
}

/** A provider call whose failure (network, refusal) answers 502 `upstream-failed`, named. */
export async function atProvider<T>(what: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof ApiError) throw err;
    throw new ApiError(
      'upstream-failed',
      `The payment provider failed to ${what}: ${err instanceof Error ? err.message : String(err)}`,
    );
  }
}
