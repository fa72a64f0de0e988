/**
 * Names the proxy routes beyond default addresses: custom domains (to their app, or a
 * 308 to another name of it) and `<app>.<zone>` for a proven zone of the app's
 * organization, with the fingerprints of the certificates the TLS edge serves. The proxy
 * asks synchronously on every request, so the table lives in memory: loaded at start,
 * reloaded after a change here, on the NOTIFY of a change anywhere (`announceEdgeChange`,
 * sent in the changing transaction), and every `EDGE_TABLE_TTL_MS` in case a notice was
 * lost.
 */
import type { TLSSocket } from 'node:tls';
import type http from 'node:http';
import { everyInterval } from '../ticker.js';
import type { ServiceContext } from '../context.js';
import { pruneContexts } from './certificates.js';
import {
  announceEdgeChange,
  EDGE_KIND,
  EDGE_TABLE_TTL_MS,
  edgeMemory,
  type EdgeRoute,
  type EdgeTable,
} from './memory.js';

/** What the proxy gets for a host that is not a default address. */
export interface EdgeAddress {
  app: string;
  /** Answer with a 308 to this URL instead of proxying. */
  redirect?: string;
}

export async function loadEdgeTable(ctx: ServiceContext): Promise<EdgeTable> {
  const [domains, zones, certificates] = await Promise.all([
    ctx.db
      .selectFrom('edge_domains')
      .innerJoin('apps', 'apps.id', 'edge_domains.app_id')
      .select([
        'edge_domains.domain',
        'edge_domains.status',
        'edge_domains.redirect_to',
        'apps.name',
      ])
      .where('edge_domains.status', 'in', ['verified', 'cert_issued'])
      .execute(),
    ctx.db
      .selectFrom('edge_zones')
      .select(['zone', 'org_id', 'status'])
      .where('status', 'in', ['verified', 'cert_issued'])
      .execute(),
    ctx.db.selectFrom('edge_certificates').select(['name', 'fingerprint']).execute(),
  ]);
  const orgIds = [...new Set(zones.map((z) => z.org_id))];
  const apps =
    orgIds.length === 0
      ? []
      : await ctx.db
          .selectFrom('apps')
          .select(['name', 'org_id'])
          .where('org_id', 'in', orgIds)
          .execute();
  const table: EdgeTable = {
    at: Date.now(),
    domains: new Map(),
    zones: new Map(),
    appsOfZoneOrgs: new Map(),
    certificates: new Map(certificates.map((c) => [c.name, c.fingerprint])),
  };
  for (const d of domains) {
    const route: EdgeRoute = { app: d.name, secure: d.status === 'cert_issued' };
    if (d.redirect_to) route.redirectTo = d.redirect_to;
    table.domains.set(d.domain, route);
  }
  for (const z of zones)
    table.zones.set(z.zone, { orgId: z.org_id, secure: z.status === 'cert_issued' });
  for (const a of apps) {
    const set = table.appsOfZoneOrgs.get(a.org_id) ?? new Set();
    set.add(a.name);
    table.appsOfZoneOrgs.set(a.org_id, set);
  }
  return table;
}

/**
 * Reloads the table now (after a change committed here, or announced), and drops the TLS
 * contexts of certificates that changed or went; the others are kept.
 */
export async function reloadEdgeTable(ctx: ServiceContext): Promise<void> {
  const memory = edgeMemory(ctx);
  const reload = ++memory.reloads;
  const table = await loadEdgeTable(ctx);
  // Two reloads overlapping: the one that read later wins, whichever finishes last.
  if (reload < memory.appliedReload) return;
  memory.appliedReload = reload;
  memory.table = table;
  pruneContexts(memory, table);
}

/** After a change committed here: this replica reloads now, the others on the notice. */
export async function edgeChanged(ctx: ServiceContext): Promise<void> {
  await announceEdgeChange(ctx.db);
  await reloadEdgeTable(ctx);
}

/** Loads the table and keeps it fresh (notices, then a timer); returns a stopper. */
export async function startEdgeTable(ctx: ServiceContext): Promise<() => void> {
  let stopped = false;
  const reload = () => {
    if (stopped) return;
    reloadEdgeTable(ctx).catch((err: unknown) =>
      ctx.log.warn({ err }, 'edge: the table was not reloaded on notice'),
    );
  };
  // `all`: the LISTEN connection was lost, so notices may have been missed.
  ctx.auth.onInvalidation((kind) => (kind === EDGE_KIND || kind === 'all') && reload());
  await reloadEdgeTable(ctx);
  const stopTimer = everyInterval(ctx.log, 'the edge table reload', EDGE_TABLE_TTL_MS, () =>
    reloadEdgeTable(ctx),
  );
  return () => {
    stopped = true;
    stopTimer();
  };
}

/** The route of `host` (lower-cased, no port), from the table in memory. */
export function edgeRouteOf(table: EdgeTable | undefined, host: string): EdgeRoute | undefined {
  if (!table) return undefined;
  const domain = table.domains.get(host);
  if (domain) return domain;
  const dot = host.indexOf('.');
  if (dot <= 0) return undefined;
  const label = host.slice(0, dot);
  const zone = table.zones.get(host.slice(dot + 1));
  if (!zone || !table.appsOfZoneOrgs.get(zone.orgId)?.has(label)) return undefined;
  return { app: label, secure: zone.secure };
}

/**
 * The proxy's resolver for names beyond default addresses. `httpsPort` is the TLS
 * edge's public port (omitted from URLs when 443), or undefined when there is no edge:
 * then nothing is redirected to HTTPS.
 */
export function edgeResolver(ctx: ServiceContext, httpsPort: () => number | undefined) {
  return (hostHeader: string, req: http.IncomingMessage): EdgeAddress | undefined => {
    const host = hostOnly(hostHeader);
    const route = edgeRouteOf(edgeMemory(ctx).table, host);
    if (!route) return undefined;
    const encrypted = (req.socket as Partial<TLSSocket>).encrypted === true;
    // The ACME CA's HTTP-01 requests name the domain: the API answers them, not the app.
    if (!encrypted && req.url?.startsWith(ACME_HTTP_PATH)) return undefined;
    const port = httpsPort();
    const path = req.url ?? '/';
    const httpsBase = (name: string) =>
      `https://${name}${port === undefined || port === 443 ? '' : `:${port}`}`;
    if (route.redirectTo) {
      const base = port !== undefined ? httpsBase(route.redirectTo) : `http://${route.redirectTo}`;
      return { app: route.app, redirect: base + path };
    }
    if (!encrypted && route.secure && port !== undefined)
      return { app: route.app, redirect: httpsBase(host) + path };
    return { app: route.app };
  };
}

const ACME_HTTP_PATH = '/.well-known/acme-challenge/';

function hostOnly(hostHeader: string): string {
  let host = hostHeader.toLowerCase();
  if (!host.startsWith('[')) host = host.replace(/:\d+$/, '');
  return host.replace(/\.$/, '');
}
