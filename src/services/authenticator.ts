/**
 * Turns a bearer value into the key it names, fast enough for every request: keys and
 * organization states are cached briefly, and every change that could make a cached
 * answer wrong (revocation, suspension) invalidates it at once, in this process directly
 * and in every other replica through PostgreSQL NOTIFY. Requests still in flight (waits,
 * shell sessions) are aborted through their signal when their key is revoked or expires
 * or their organization is suspended, on whichever replica the change was made.
 */
import type { Logger } from 'pino';
import type pg from 'pg';
import { sql } from 'kysely';
import { sha256 } from '../crypto/tokens.js';
import { ApiError } from '../errors/api-error.js';
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
  /** 'mcp': answered on /v1/mcp and the routes its tool calls run, nowhere else. */
  audience: 'mcp' | null;
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

/**
 * What a tracked caller proved itself with: an API key, or at the SSH gateway an SSH
 * token or a registered SSH key (whose ids stand in the key's place; revoking or deleting
 * one is announced like a key's revocation, `keyRevoked(id, org)`).
 */
export type Credential = 'api-key' | 'ssh-token' | 'ssh-key';

/** Why a request in flight (a wait, a shell session) was ended under its key. */
export type InFlightEnd = 'revoked' | 'expired' | 'org-suspended' | 'delegation-ended';

/** The abort reason of `principal.signal`: the answer the request ends with, and why. */
export class AuthEnded extends ApiError {
  constructor(readonly reason: InFlightEnd) {
    super(...AuthEnded.answer(reason));
  }

  private static answer(reason: InFlightEnd): [ApiError['code'], string | undefined] {
    switch (reason) {
      case 'revoked':
        return ['unauthenticated', 'The API key was revoked while the request ran.'];
      case 'expired':
        return ['unauthenticated', 'The API key expired while the request ran.'];
      case 'org-suspended':
        return ['org-suspended', undefined];
      case 'delegation-ended':
        return [
          'delegation-refused',
          "This key's organization no longer manages the organization the request acts as.",
        ];
    }
  }
}

/** setTimeout's longest delay; a key expiring later is looked at again then. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * A request in flight with a key, acting as an organization: its abort controller is made
 * only if someone asks. It ends when the key is revoked or expires, when either
 * organization is suspended, or when the delegation it acts under is withdrawn.
 */
class InFlight {
  private ctl: AbortController | undefined;
  ended: AuthEnded | undefined;
  timer: NodeJS.Timeout | undefined;

  constructor(
    readonly key: AuthenticatedKey,
    /** The organization the request acts as (the key's own, or a managed one). */
    readonly actingOrgId: string,
    readonly credential: Credential,
  ) {}

  get signal(): AbortSignal {
    if (!this.ctl) {
      this.ctl = new AbortController();
      if (this.ended) this.ctl.abort(this.ended);
    }
    return this.ctl.signal;
  }

  concerns(orgId: string): boolean {
    return this.key.orgId === orgId || this.actingOrgId === orgId;
  }

  end(reason: InFlightEnd): void {
    if (this.ended) return;
    this.ended = new AuthEnded(reason);
    clearTimeout(this.timer);
    this.ctl?.abort(this.ended);
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
  private recheckTimer: NodeJS.Timeout | undefined;
  /** The LISTEN connection was lost once: what it missed is looked up when it is back. */
  private missedNotices = false;

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
    // A backstop under NOTIFY: requests in flight are checked against the rows now and
    // then, so none outlives its key by more than this even if a notice went missing.
    this.recheckTimer = setInterval(() => void this.recheckInFlight(), this.ttlMs);
    this.recheckTimer.unref();
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
      this.missedNotices = true;
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
    // Revocations and suspensions announced while we were not listening ended nothing.
    if (this.missedNotices) {
      this.missedNotices = false;
      void this.recheckInFlight();
    }
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
    clearInterval(this.recheckTimer);
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
          'k.audience',
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
        audience: row.audience,
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

  /**
   * Ties a request to its key and the organization it acts as: revoking the key, its
   * expiry, suspending either organization or withdrawing the delegation aborts the
   * request's signal (with an `AuthEnded` naming why), here or on any other replica.
   */
  track(
    key: AuthenticatedKey,
    actingOrgId: string = key.orgId,
    credential: Credential = 'api-key',
  ): { readonly signal: AbortSignal; done(): void } {
    const entry = new InFlight(key, actingOrgId, credential);
    if (this.recentlyRevoked.has(key.id)) entry.end('revoked');
    else this.armExpiry(entry);
    let set = this.inflight.get(key.id);
    if (!set) this.inflight.set(key.id, (set = new Set()));
    set.add(entry);
    return {
      get signal() {
        return entry.signal;
      },
      done: () => {
        clearTimeout(entry.timer);
        set.delete(entry);
        if (set.size === 0 && this.inflight.get(key.id) === set) this.inflight.delete(key.id);
      },
    };
  }

  /** Ends the entry when its key expires (checked per request only, otherwise). */
  private armExpiry(entry: InFlight): void {
    const expiresAt = entry.key.expiresAt;
    if (!expiresAt || entry.ended) return;
    const left = expiresAt.getTime() - this.clock().getTime();
    if (left <= 0) {
      entry.end('expired');
      return;
    }
    entry.timer = setTimeout(() => this.armExpiry(entry), Math.min(left, MAX_TIMER_MS));
    entry.timer.unref();
  }

  private *tracked(): Iterable<InFlight> {
    for (const set of this.inflight.values()) yield* set;
  }

  /**
   * Looks the rows of tracked requests up again and ends those whose key is revoked or
   * expired, or whose organizations are suspended or no longer delegated: after a lost
   * LISTEN connection, for an organization that changed, and now and then as a backstop.
   */
  async recheckInFlight(onlyOrg?: string): Promise<void> {
    const entries = [...this.tracked()].filter(
      (e) => !e.ended && (onlyOrg === undefined || e.concerns(onlyOrg)),
    );
    if (entries.length === 0) return;
    try {
      const idsOf = (c: Credential) => [
        ...new Set(entries.filter((e) => e.credential === c).map((e) => e.key.id)),
      ];
      const orgIds = [...new Set(entries.flatMap((e) => [e.key.orgId, e.actingOrgId]))];
      const [live, orgs] = await Promise.all([
        this.liveCredentials(idsOf('api-key'), idsOf('ssh-token'), idsOf('ssh-key')),
        this.db
          .selectFrom('orgs')
          .select(['id', 'suspended_at', 'managed_by'])
          .where('id', 'in', orgIds)
          .execute(),
      ]);
      const orgOf = new Map(orgs.map((o) => [o.id, o]));
      for (const e of entries) {
        const own = orgOf.get(e.key.orgId);
        const acting = orgOf.get(e.actingOrgId);
        if (!live.has(e.key.id)) e.end('revoked');
        else if (e.key.expiresAt && e.key.expiresAt.getTime() <= this.clock().getTime())
          e.end('expired');
        else if (!own || own.suspended_at !== null || !acting || acting.suspended_at !== null)
          e.end('org-suspended');
        else if (e.actingOrgId !== e.key.orgId && acting.managed_by !== e.key.orgId)
          e.end('delegation-ended');
      }
    } catch (err) {
      this.log.warn({ err }, 'requests in flight could not be checked against their keys');
    }
  }

  /**
   * Which of these credentials still exist: API keys not revoked, SSH tokens and SSH keys
   * not deleted (an SSH token's expiry is its `expiresAt`, checked by the caller).
   */
  private async liveCredentials(
    apiKeys: string[],
    sshTokens: string[],
    sshKeys: string[],
  ): Promise<Set<string>> {
    const [keys, tokens, sshKeyRows] = await Promise.all([
      apiKeys.length === 0
        ? []
        : this.db
            .selectFrom('api_keys')
            .select('id')
            .where('id', 'in', apiKeys)
            .where('revoked_at', 'is', null)
            .execute(),
      sshTokens.length === 0
        ? []
        : this.db.selectFrom('ssh_tokens').select('id').where('id', 'in', sshTokens).execute(),
      sshKeys.length === 0
        ? []
        : this.db.selectFrom('ssh_keys').select('id').where('id', 'in', sshKeys).execute(),
    ]);
    return new Set([...keys, ...tokens, ...sshKeyRows].map((r) => r.id));
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
      for (const entry of this.inflight.get(id) ?? []) entry.end('revoked');
      if (orgId) this.listings.delete(orgId);
    } else if (kind === 'keys') {
      this.listings.delete(id);
    } else if (kind === 'org') {
      this.orgs.delete(id);
      this.listings.delete(id);
      for (const [k, v] of this.keys) if (v.value.orgId === id) this.keys.delete(k);
      // Suspended, or no longer managed by the organization a request acts for: the
      // notice does not say which, so the rows of the requests concerned say it.
      void this.recheckInFlight(id);
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
