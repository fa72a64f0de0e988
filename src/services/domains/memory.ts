/**
 * What the edge keeps in a replica's memory: the table of names the proxy routes beyond
 * default addresses (custom domains, zones) with the fingerprint of every certificate,
 * and the TLS contexts built from those certificates. The table is reloaded after a change
 * (made here, or announced by another replica through NOTIFY) and every
 * `EDGE_TABLE_TTL_MS` as a backstop; a TLS context is built once per certificate and kept
 * while the table names the same fingerprint for it.
 */
import type tls from 'node:tls';
import { sql } from 'kysely';
import type { Executor } from '../../store/db.js';
import type { ServiceContext } from '../context.js';

/**
 * The backstop reload: changes reach every replica at once through NOTIFY, and a lost
 * LISTEN connection makes each reload when it is back (`all`), so this only bounds what
 * an unforeseen miss could last.
 */
export const EDGE_TABLE_TTL_MS = 30_000;

/** A routed name: the app it reaches, and the 308 target, if any. */
export interface EdgeRoute {
  app: string;
  redirectTo?: string;
  /** A certificate serves the name: plain HTTP is redirected to HTTPS. */
  secure: boolean;
}

export interface EdgeTable {
  at: number;
  /** Custom domains. */
  domains: Map<string, EdgeRoute>;
  /** Proven zones → org id, and org id → its app names. */
  zones: Map<string, { orgId: string; secure: boolean }>;
  appsOfZoneOrgs: Map<string, Set<string>>;
  /** Certificate name (a domain, or `*.<zone>`) → fingerprint of its chain. */
  certificates: Map<string, string>;
}

/** A TLS context built (or being built) from the certificate of `fingerprint`. */
export interface CachedContext {
  fingerprint: string;
  context: Promise<tls.SecureContext | undefined>;
}

export interface EdgeMemory {
  /** By certificate name; only names the table lists, with the table's fingerprint. */
  contexts: Map<string, CachedContext>;
  /** How many TLS contexts this replica built (tests: a reload without changes builds none). */
  contextsBuilt: number;
  table?: EdgeTable;
  /** Reloads started and the latest applied: a slower, older reload never wins. */
  reloads: number;
  appliedReload: number;
}

/** The auth layer's NOTIFY channel (services/authenticator.ts), kind `edge`. */
const CHANNEL = 'pier_auth';
export const EDGE_KIND = 'edge';

/**
 * Tells every replica (this one included) to reload its edge table: a NOTIFY, delivered
 * when `ex`'s transaction commits, which the authenticator hands to its listeners.
 */
export async function announceEdgeChange(ex: Executor): Promise<void> {
  await sql`SELECT pg_notify(${CHANNEL}, ${`${EDGE_KIND}:`})`.execute(ex);
}

// Per platform (tests run several in one process), not per module.
const memories = new WeakMap<ServiceContext, EdgeMemory>();

export function edgeMemory(ctx: ServiceContext): EdgeMemory {
  let m = memories.get(ctx);
  if (!m) {
    m = { contexts: new Map(), contextsBuilt: 0, reloads: 0, appliedReload: 0 };
    memories.set(ctx, m);
  }
  return m;
}

/**
 * Keeps this replica's table in step with an app created or deleted here, at once rather
 * than at the next reload: `<app>.<zone>` of an organization with a proven zone answers
 * as soon as the app exists (no certificate is needed), and stops with it. Other replicas
 * follow on the NOTIFY sent here for a new app (the deletion's is sent in its transaction
 * by the teardown), or within `EDGE_TABLE_TTL_MS` if that is lost.
 */
export function noteAppOfZoneOrg(
  ctx: ServiceContext,
  orgId: string,
  app: string,
  exists: boolean,
): void {
  const table = edgeMemory(ctx).table;
  if (!table) return;
  const apps = table.appsOfZoneOrgs.get(orgId);
  if (exists) {
    if (![...table.zones.values()].some((z) => z.orgId === orgId)) return;
    table.appsOfZoneOrgs.set(orgId, (apps ?? new Set()).add(app));
    announceEdgeChange(ctx.db).catch((err: unknown) =>
      ctx.log.warn({ err }, 'edge: other replicas not told of a new app (they reload within 30 s)'),
    );
  } else {
    apps?.delete(app);
    // Its custom domains went with it.
    for (const [name, route] of table.domains) if (route.app === app) table.domains.delete(name);
  }
}
