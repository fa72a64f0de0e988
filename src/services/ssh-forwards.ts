/**
 * Where an SSH gateway login's port forward (`ssh -L`, CONTRACT 8) may go, judged like the
 * database tunnel (databases/tunnels.ts, whose caps and start rate it shares):
 *
 * - `<database name>:<port>`: a database attached to the login's app, at its front's port
 *   (as its URL names it) or its kind's usual one (5432, 6379); refused while the
 *   organization's credit is blocked, as the tunnel is (the database is stopped then);
 * - `<machine id>:<port>`: any port of a machine of the login's app (a suspended machine
 *   is woken first, as for a shell).
 *
 * Anything else (another app's database or machine, an address) answers `not-found`,
 * exactly like a missing one.
 */
import { ApiError, notFound } from '../errors/api-error.js';
import { assertCreditOpen } from './billing/blocking.js';
import type { ServiceContext } from './context.js';
import { admitTunnel } from './databases/tunnels.js';
import { reachGuest } from './machines/guest-access.js';
import { runtimeOf } from './machines/lifecycle.js';
import { machinesQuery } from './machines/records.js';
import type { RateLimiter } from './rate-limit.js';
import type { SshLogin } from './ssh-logins.js';

/** An admitted forward: where to dial, and its place to give back when it ends. */
export interface ForwardTarget {
  host: string;
  port: number;
  /** `database <name>` or `machine <id>`, for logs. */
  what: string;
  release(): void;
}

const USUAL_PORTS = { postgres: 5432, redis: 6379 } as const;

export async function admitForward(
  ctx: ServiceContext,
  rateLimiter: RateLimiter,
  login: SshLogin,
  destination: string,
  port: number,
): Promise<ForwardTarget> {
  const missing = () => notFound(`'${destination}:${port}' of app '${login.app}'`);
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw missing();
  if (destination.startsWith('mch-')) {
    const row = await machinesQuery(ctx.db)
      .where('machines.org_id', '=', login.orgId)
      .where('machines.id', '=', destination)
      .where('apps.name', '=', login.app)
      .executeTakeFirst();
    if (!row) throw missing();
    await reachGuest(ctx, row, { wake: true });
    const address = await runtimeOf(ctx).address(row.id, port);
    if (!address) throw new ApiError('machine-stopped', `Machine ${row.id} is not running.`);
    return { ...address, what: `machine ${row.id}`, release: () => {} };
  }
  const attached = await ctx.db
    .selectFrom('database_attachments as a')
    .innerJoin('databases as d', 'd.id', 'a.database_id')
    .innerJoin('apps', 'apps.id', 'a.app_id')
    .select(['d.name', 'd.kind', 'd.port'])
    .where('apps.org_id', '=', login.orgId)
    .where('apps.name', '=', login.app)
    .where('d.name', '=', destination)
    .executeTakeFirst();
  if (!attached || (port !== attached.port && port !== USUAL_PORTS[attached.kind])) {
    throw missing();
  }
  await assertCreditOpen(ctx.db, login.orgId);
  const tunnel = await admitTunnel(ctx, rateLimiter, login.orgId, attached.name);
  return {
    host: tunnel.host,
    port: tunnel.port,
    what: `database ${tunnel.name}`,
    release: tunnel.release,
  };
}
