/**
 * Database tunnels (issue 13 item 5): a person's client reaches a database through the
 * API (`GET /v1/resources/:name/tunnel`, a WebSocket), since fronts serve only the host
 * and the machines' network. This admits a tunnel: the database must be the caller's
 * (404 like a missing one otherwise) and ready, and the organization within its bounds.
 * The route carries the bytes; TLS stays end to end between the client and the server.
 *
 * Open tunnels are counted in this replica's memory: a tunnel lives in the process that
 * carries it, and ends with it.
 */
import { ApiError } from '../../errors/api-error.js';
import type { RateLimiter } from '../rate-limit.js';
import { findDatabase } from './records.js';
import type { DatabaseContext } from './work.js';

/** Bounds of tunnels; a test may lower them (the object is read at each use). */
export const TUNNEL_LIMITS = {
  /** Tunnels open at once to one database (a client pool fits, a flood does not). */
  perDatabase: 16,
  /** Tunnels open at once in one organization, on this replica. */
  perOrg: 64,
  /** Tunnel opens per organization per minute. */
  opensPerMinute: 120,
  /** A tunnel with no byte either way for this long is closed. */
  idleMs: 30 * 60_000,
  /**
   * Bytes either direction may queue in pier before it stops reading the other side: a
   * slow peer slows its sender instead of growing pier's memory.
   */
  highWaterBytes: 1024 * 1024,
};

/** Where an admitted tunnel dials: the database's front on its host. */
export interface AdmittedTunnel {
  databaseId: string;
  name: string;
  kind: 'postgres' | 'redis';
  host: string;
  port: number;
  /** Gives its place back; idempotent (called when the tunnel, or its request, ends). */
  release(): void;
}

interface OpenCounts {
  byDatabase: Map<string, number>;
  byOrg: Map<string, number>;
}

// Keyed by context: tests run several platforms in one process.
const countsOf = new WeakMap<object, OpenCounts>();

function counts(ctx: DatabaseContext): OpenCounts {
  let c = countsOf.get(ctx);
  if (!c) {
    c = { byDatabase: new Map(), byOrg: new Map() };
    countsOf.set(ctx, c);
  }
  return c;
}

const bump = (m: Map<string, number>, key: string, by: number) => {
  const n = (m.get(key) ?? 0) + by;
  if (n > 0) m.set(key, n);
  else m.delete(key);
};

/** The host address of a database's front as seen from pier (one host for now). */
export function frontHostOf(host: string): string {
  // The front serves the host itself: loopback is the address that needs no naming.
  return host === 'local' ? '127.0.0.1' : host;
}

/** Checks and reserves a tunnel's place; the caller must `release` it when it ends. */
export async function admitTunnel(
  ctx: DatabaseContext,
  rateLimiter: RateLimiter,
  orgId: string,
  name: string,
): Promise<AdmittedTunnel> {
  const row = await findDatabase(ctx.db, orgId, name);
  if (row.state !== 'ready') {
    throw new ApiError('not-ready', `Database '${name}' is ${row.state}: it takes no tunnel now.`);
  }
  rateLimiter.hit(`tunnel:${orgId}`, TUNNEL_LIMITS.opensPerMinute, 60_000);
  const c = counts(ctx);
  const openHere = c.byDatabase.get(row.id) ?? 0;
  if (openHere >= TUNNEL_LIMITS.perDatabase) {
    throw new ApiError(
      'too-many-tunnels',
      `Database '${name}' has ${openHere} tunnels open, as many as allowed.`,
      { limit: TUNNEL_LIMITS.perDatabase },
    );
  }
  const openInOrg = c.byOrg.get(orgId) ?? 0;
  if (openInOrg >= TUNNEL_LIMITS.perOrg) {
    throw new ApiError(
      'too-many-tunnels',
      `The organization has ${openInOrg} database tunnels open, as many as allowed.`,
      { limit: TUNNEL_LIMITS.perOrg },
    );
  }
  bump(c.byDatabase, row.id, 1);
  bump(c.byOrg, orgId, 1);
  let released = false;
  return {
    databaseId: row.id,
    name: row.name,
    kind: row.kind,
    host: frontHostOf(row.host),
    port: row.port,
    release: () => {
      if (released) return;
      released = true;
      bump(c.byDatabase, row.id, -1);
      bump(c.byOrg, orgId, -1);
    },
  };
}

/** Tunnels open now to a database on this replica (tests and reports). */
export function openTunnels(ctx: DatabaseContext, databaseId: string): number {
  return counts(ctx).byDatabase.get(databaseId) ?? 0;
}
