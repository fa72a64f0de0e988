/**
 * Word that an app's protection changed, so the proxy's cache of it (proxy/protection.ts)
 * is dropped at once: in this process synchronously, in every other replica through the
 * auth layer's NOTIFY channel (`protection:<app name>`, delivered on commit), which the
 * authenticator hands to its `onInvalidation` listeners. A revoked link or a rotated
 * secret is refused by the next request.
 */
import { sql } from 'kysely';
import type { Executor } from '../../store/db.js';
import type { ServiceContext } from '../context.js';

/** The NOTIFY channel of the authenticator (services/authenticator.ts). */
const CHANNEL = 'pier_auth';
export const PROTECTION_KIND = 'protection';

const listeners = new WeakMap<ServiceContext, Set<(app: string) => void>>();

/** Calls `fn(appName)` whenever this process changes an app's protection. */
export function onProtectionChange(ctx: ServiceContext, fn: (app: string) => void): void {
  let set = listeners.get(ctx);
  if (!set) listeners.set(ctx, (set = new Set()));
  set.add(fn);
}

/**
 * Runs `change` in a transaction holding the app's row, announces the change to other
 * replicas on commit, and drops this process's cached state once committed (not
 * before, or a request in between could cache the old state again).
 */
/**
 * Announces, inside the caller's transaction, that the protection of `appName` changed:
 * every replica (this one included, through its LISTEN) drops its cached state on commit.
 */
export async function announceProtectionWithin(tx: Executor, appName: string): Promise<void> {
  await sql`SELECT pg_notify(${CHANNEL}, ${`${PROTECTION_KIND}:${appName}`})`.execute(tx);
}

export async function changeProtection<T>(
  ctx: ServiceContext,
  appName: string,
  change: (tx: Executor) => Promise<T>,
): Promise<T> {
  const out = await ctx.db.transaction().execute(async (tx) => {
    const result = await change(tx);
    await announceProtectionWithin(tx, appName);
    return result;
  });
  for (const fn of listeners.get(ctx) ?? []) fn(appName);
  return out;
}
