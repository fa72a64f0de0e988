/**
 * Turns a bearer value into the key it names, fast enough for every request: keys and
 * organization states are cached briefly, and every change that could make a cached
 * answer wrong (revocation, suspension) invalidates it at once, in this process directly
 * and in every other replica through PostgreSQL NOTIFY. Requests still in flight with a
 * revoked key are aborted through their signal.
 */
import type { Logger } from 'pino';
import type pg from 'pg';
import { sql } from 'kysely';
import { sha256 } from '../crypto/tokens.js';
import type { Db } from '../store/db.js';
import type { AgentBlock } from '../store/schema.js';
import type { AuthEvents, Clock } from './context.js';
import { touchKeys } from './keys.js';

export interface AuthenticatedKey {
  id: string;
  orgId: string;
  userId: string | null;
  role: 'admin' | 'member' | null;
  scopes: string[] | null;
  expiresAt: Date | null;
  agent: AgentBlock | null;
  console: boolean;
}

export interface OrgAuthState {
  id: string;
  suspended: boolean;
  managedBy: string | null;
}

interface Cached<T> {
  value: T;
  at: number;
}

/** How long a cached org listing of keys may be served (lastUsedAt moves within it). */
const LISTING_TTL_MS = 5_000;

/** A request in flight with a key: its abort controller is made only if someone asks. */
class InFlight {
  private ctl: AbortController | undefined;
  revoked = false;

  get signal(): AbortSignal {
    if (!this.ctl) {
      this.ctl = new AbortController();
      if (this.revoked) this.ctl.abort(new Error('key revoked'));
    }
    return this.ctl.signal;
  }

  revoke(): void {
    this.revoked = true;
    this.ctl?.abort(new Error('key revoked'));
  }
}

/** The NOTIFY channel of invalidations; `kind:id[:org]` payloads. */
export const INVALIDATION_CHANNEL = 'pier_auth';

export class Authenticator implements AuthEvents {
  private readonly keys = new Map<string, Cached<AuthenticatedKey>>();
  private readonly orgs = new Map<string, Cached<OrgAuthState>>();
  private readonly inflight = new Map<string, Set<InFlight>>();
  private readonly listings = new Map<string, Cached<unknown>>();
  /** Keys revoked lately, so a request that asks for its signal late still sees it. */
  private readonly recentlyRevoked = new Map<string, number>();
  private readonly listeners: ((kind: string, id: string) => void)[] = [];
  private readonly uses = new Map<string, Date>();
  private generation = 0;
  private listener: pg.PoolClient | undefined;
  private pool: pg.Pool | undefined;
  private reconnect: NodeJS.Timeout | undefined;
  private stopping = false;
  private flushTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    private readonly log: Logger,
    private readonly ttlMs = 30_000,
  ) {}

  async start(pool: pg.Pool): Promise<void> {
    this.pool = pool;
    await this.listen();
    // lastUsedAt is written in batches: one UPDATE per second instead of one per request.
    this.flushTimer = setInterval(() => void this.flushUses(), 1000);
  }

  /**
   * Opens the LISTEN connection. When it drops, whatever other replicas announced in the
   * meantime is lost, so every cache is emptied and the connection is opened again.
   */
  private async listen(): Promise<void> {
    const client = await this.pool!.connect();
    this.listener = client;
    const lost = (err?: Error) => {
      if (this.listener !== client || this.stopping) return;
      this.log.warn({ err }, 'auth listener lost; caches emptied, listening again');
      this.listener = undefined;
      client.release(err ?? true);
      this.forgetEverything();
      this.reconnect = setTimeout(() => {
        this.listen().catch((e: Error) => lost(e));
      }, 1000);
    };
    client.on('error', lost);
    client.on('end', () => lost());
    client.on('notification', (msg) => this.applyInvalidation(msg.payload ?? ''));
    await client.query(`LISTEN ${INVALIDATION_CHANNEL}`);
  }

  private forgetEverything(): void {
    this.generation++;
    this.keys.clear();
    this.orgs.clear();
    this.listings.clear();
    for (const fn of this.listeners) fn('all', '');
  }

  async stop(): Promise<void> {
    this.stopping = true;
    clearTimeout(this.reconnect);
    clearInterval(this.flushTimer);
    await this.flushUses();
    if (this.listener) {
      await this.listener.query(`UNLISTEN ${INVALIDATION_CHANNEL}`).catch(() => {});
      this.listener.release();
      this.listener = undefined;
    }
  }

  /**
   * The live key named by `token` and its organization, when both are in the cache: the
   * path nearly every request takes, with no promise and no query. Undefined means "ask
   * `authenticate`", which also answers for unknown, revoked and expired keys.
   */
  cached(token: string): { key: AuthenticatedKey; org: OrgAuthState } | undefined {
    const key = this.fresh(this.keys.get(sha256(token, 'base64')));
    if (!key) return undefined;
    const org = this.fresh(this.orgs.get(key.orgId));
    if (!org) return undefined;
    const now = this.clock();
    if (key.expiresAt && key.expiresAt.getTime() <= now.getTime()) return undefined;
    this.uses.set(key.id, now);
    return { key, org };
  }

  /** Organization state from the cache only (undefined when not cached or stale). */
  cachedOrg(orgId: string): OrgAuthState | undefined {
    return this.fresh(this.orgs.get(orgId));
  }

  /** The live key named by `token`, or undefined when it is unknown, revoked or expired. */
  async authenticate(token: string): Promise<AuthenticatedKey | undefined> {
    const cacheKey = sha256(token, 'base64');
    const now = this.clock();
    let key = this.fresh(this.keys.get(cacheKey));
    if (!key) {
      const gen = this.generation;
      const row = await this.db
        .selectFrom('api_keys as k')
        .leftJoin('users as u', 'u.id', 'k.user_id')
        .select([
          'k.id',
          'k.org_id',
          'k.user_id',
          'u.role',
          'k.scopes',
          'k.expires_at',
          'k.agent',
          'k.console',
        ])
        .where('k.hash', '=', Buffer.from(cacheKey, 'base64'))
        .where('k.revoked_at', 'is', null)
        .executeTakeFirst();
      if (!row) return undefined;
      key = {
        id: row.id,
        orgId: row.org_id,
        userId: row.user_id,
        role: row.role ?? null,
        scopes: row.scopes,
        expiresAt: row.expires_at,
        agent: row.agent,
        console: row.console,
      };
      // An invalidation that arrived while we read would be lost if we cached now.
      if (gen === this.generation) this.keys.set(cacheKey, { value: key, at: Date.now() });
    }
    if (key.expiresAt && key.expiresAt.getTime() <= now.getTime()) return undefined;
    this.uses.set(key.id, now);
    return key;
  }

  /** Suspension and management of an organization, cached like keys. */
  async org(orgId: string): Promise<OrgAuthState | undefined> {
    const cached = this.fresh(this.orgs.get(orgId));
    if (cached) return cached;
    const gen = this.generation;
    const row = await this.db
      .selectFrom('orgs')
      .select(['id', 'suspended_at', 'managed_by'])
      .where('id', '=', orgId)
      .executeTakeFirst();
    if (!row) return undefined;
    const state = { id: row.id, suspended: row.suspended_at !== null, managedBy: row.managed_by };
    if (gen === this.generation) this.orgs.set(orgId, { value: state, at: Date.now() });
    return state;
  }

  /** Ties a request to its key, so that revoking the key aborts the request. */
  track(keyId: string): { readonly signal: AbortSignal; done(): void } {
    const entry = new InFlight();
    if (this.recentlyRevoked.has(keyId)) entry.revoke();
    let set = this.inflight.get(keyId);
    if (!set) this.inflight.set(keyId, (set = new Set()));
    set.add(entry);
    return {
      get signal() {
        return entry.signal;
      },
      done: () => {
        set.delete(entry);
        if (set.size === 0) this.inflight.delete(keyId);
      },
    };
  }

  async keyListing<T>(orgId: string, load: () => Promise<T>): Promise<T> {
    const cached = this.listings.get(orgId);
    if (cached && Date.now() - cached.at <= LISTING_TTL_MS) return cached.value as T;
    const gen = this.generation;
    const value = await load();
    if (gen === this.generation) this.listings.set(orgId, { value, at: Date.now() });
    return value;
  }

  onInvalidation(fn: (kind: string, id: string) => void): void {
    this.listeners.push(fn);
  }

  async keysChanged(orgId: string): Promise<void> {
    await this.publish(`keys:${orgId}`);
  }

  async keyRevoked(keyId: string, orgId: string): Promise<void> {
    await this.publish(`key:${keyId}:${orgId}`);
  }

  async orgChanged(orgId: string): Promise<void> {
    await this.publish(`org:${orgId}`);
  }

  /** Invalidates here at once, then in every other replica through NOTIFY. */
  private async publish(payload: string): Promise<void> {
    this.applyInvalidation(payload);
    await sql`SELECT pg_notify(${INVALIDATION_CHANNEL}, ${payload})`.execute(this.db);
  }

  private applyInvalidation(payload: string): void {
    this.generation++;
    const [kind, id, orgId] = payload.split(':') as [string, string, string | undefined];
    for (const fn of this.listeners) fn(kind, id);
    if (kind === 'key') {
      const now = Date.now();
      this.recentlyRevoked.set(id, now);
      for (const [k, t] of this.recentlyRevoked)
        if (now - t > 10 * this.ttlMs) this.recentlyRevoked.delete(k);
      for (const [k, v] of this.keys) if (v.value.id === id) this.keys.delete(k);
      for (const entry of this.inflight.get(id) ?? []) entry.revoke();
      if (orgId) this.listings.delete(orgId);
    } else if (kind === 'keys') {
      this.listings.delete(id);
    } else if (kind === 'org') {
      this.orgs.delete(id);
      this.listings.delete(id);
      for (const [k, v] of this.keys) if (v.value.orgId === id) this.keys.delete(k);
    }
  }

  private fresh<T>(entry: Cached<T> | undefined): T | undefined {
    if (!entry || Date.now() - entry.at > this.ttlMs) return undefined;
    return entry.value;
  }

  private async flushUses(): Promise<void> {
    if (this.uses.size === 0) return;
    const batch = new Map(this.uses);
    this.uses.clear();
    await touchKeys(this.db, batch).catch((err) =>
      this.log.warn({ err }, 'lastUsedAt flush failed'),
    );
  }
}
