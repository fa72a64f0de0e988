/**
 * What the HTTP app is built from: the config, the services and the platform's shared
 * objects. Route families take it as their second argument; it lives apart from app.ts so
 * that routes and the app that registers them do not import each other.
 */
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { Config } from '../config.js';
import type { Authenticator } from '../services/authenticator.js';
import type { ServiceContext } from '../services/context.js';
import type { RateLimiter } from '../services/rate-limit.js';
import type { PoolHandle } from '../storage/pool-handle.js';

export interface AppDeps {
  config: Config;
  ctx: ServiceContext;
  authenticator: Authenticator;
  operatorToken: string;
  sshGateway: { address: string; hostKey: string; fingerprint: string };
  logger: Logger;
  rateLimiter: RateLimiter;
  /** The host's storage pool, opened on first use. */
  pool: PoolHandle;
  /** Extra route families, registered after the built-in ones (extensions and tests). */
  extraRoutes?: ((app: FastifyInstance, deps: AppDeps) => void)[];
}
