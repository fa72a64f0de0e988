/**
 * Standard Webhooks signing (https://www.standardwebhooks.com): the secret is `whsec_`
 * and the base64 of 24 random bytes; a delivery is signed with HMAC-SHA256 under those
 * bytes over `<webhook-id>.<webhook-timestamp>.<body>`, sent as `v1,<base64>`. The
 * `standardwebhooks` package (and Svix's libraries) verify it as is.
 */
import { createHmac, randomBytes } from 'node:crypto';

export const SECRET_PREFIX = 'whsec_';

export function newWebhookSecret(): string {
  return SECRET_PREFIX + randomBytes(24).toString('base64');
}

/** The three headers of one attempt; `timestamp` in seconds since the epoch. */
export function signedHeaders(
  secret: string,
  id: string,
  timestamp: number,
  body: string,
): Record<string, string> {
  const key = Buffer.from(secret.slice(SECRET_PREFIX.length), 'base64');
  const mac = createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64');
  return {
    'webhook-id': id,
    'webhook-timestamp': String(timestamp),
    'webhook-signature': `v1,${mac}`,
  };
}
