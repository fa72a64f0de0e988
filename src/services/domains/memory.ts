/**
 * What the edge keeps in a replica's memory: TLS contexts by certificate name, and the
 * table of names the proxy routes beyond default addresses (custom domains, zones). Both
 * are rebuilt from the store on a miss or after `EDGE_TABLE_TTL_MS`, and dropped at once
 * by changes made here; another replica's change reaches this one within the TTL.
 */
import type tls from 'node:tls';
import type { ServiceContext } from '../context.js';

export const EDGE_TABLE_TTL_MS = 2000;

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
}

export interface EdgeMemory {
  /** null: known to have no certificate. */
  contexts: Map<string, tls.SecureContext | null>;
  table?: EdgeTable;
}

// Per platform (tests run several in one process), not per module.
const memories = new WeakMap<ServiceContext, EdgeMemory>();

export function edgeMemory(ctx: ServiceContext): EdgeMemory {
  let m = memories.get(ctx);
  if (!m) {
    m = { contexts: new Map() };
    memories.set(ctx, m);
  }
  return m;
}

/**
 * Keeps this replica's table in step with an app created or deleted here, at once rather
 * than at the next reload: `<app>.<zone>` of an organization with a proven zone answers
 * as soon as the app exists (no certificate is needed), and stops with it. Other replicas
 * follow within `EDGE_TABLE_TTL_MS`.
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
  } else {
    apps?.delete(app);
    // Its custom domains went with it.
    for (const [name, route] of table.domains) if (route.app === app) table.domains.delete(name);
  }
}
