/** What the SSH gateway is built from: the services and the platform's shared objects. */
import type { Logger } from 'pino';
import type { Authenticator } from '../services/authenticator.js';
import type { ServiceContext } from '../services/context.js';
import type { RateLimiter } from '../services/rate-limit.js';

export interface GatewayDeps {
  ctx: ServiceContext;
  /** Organization states, and the signal that ends a login's sessions when it may no longer. */
  authenticator: Authenticator;
  /** The API's limiter: the gateway's failed logins and session starts share its windows. */
  rateLimiter: RateLimiter;
  log: Logger;
}
