/**
 * What this process remembers about buckets to answer the S3 gateway quickly, and how a
 * change reaches it. `platform.ts` makes one `BucketCaches` per process and puts it in the
 * ServiceContext: the gateway reads through it (s3-keys.ts `grantOf`, cors.ts
 * `corsRulesOf`), and the services that change what it holds drop entries from it.
 *
 * A change is announced twice: a NOTIFY on the invalidation channel inside the changing
 * transaction, which every replica's authenticator hears at commit and passes on here
 * (`onInvalidation`), and a local drop at once, so the replica that made the change never
 * answers from what it just changed (s3-keys.ts `announceS3KeyRevoked`, cors.ts
 * `announceCorsChanged`). When the LISTEN connection is lost, whatever other replicas
 * announced meanwhile is lost too, so everything is dropped (`all`).
 *
 * This file is a leaf: it imports no service, so the ServiceContext can name its type.
 */
import type { CorsRule } from '../../store/schema.js';

/** A live S3 key as the gateway checks it. */
export interface S3KeyGrant {
  accessKeyId: string;
  orgId: string;
  bucketId: string;
  bucketName: string;
  /** The organization is suspended: its keys are refused (AccessDenied). */
  suspended: boolean;
  /** Reads only: every other method is refused (AccessDenied). A preview's keys. */
  readOnly: boolean;
  secret: string;
}

/** Entries live at most `ttlMs` (a backstop: changes drop them at once). */
export class TtlCache<T> {
  private readonly entries = new Map<string, { value: T; at: number }>();
  /** Bumped by every drop: a lookup that raced one must not cache what it read. */
  private generation = 0;

  constructor(
    private readonly ttlMs: number,
    private readonly maxEntries = 10_000,
  ) {}

  /** The cached value, or `load()`'s, which is cached unless undefined. */
  async get(key: string, load: () => Promise<T | undefined>): Promise<T | undefined> {
    const hit = this.entries.get(key);
    if (hit && Date.now() - hit.at < this.ttlMs) return hit.value;
    const gen = this.generation;
    const value = await load();
    if (value !== undefined && gen === this.generation) {
      if (this.entries.size >= this.maxEntries) this.entries.clear();
      this.entries.set(key, { value, at: Date.now() });
    }
    return value;
  }

  /** Drops one entry, or (without a key) every entry. */
  drop(key?: string): void {
    this.generation++;
    if (key === undefined) this.entries.clear();
    else this.entries.delete(key);
  }
}

/** The invalidation kinds of bucket state (`kind:id` payloads on the auth channel). */
export const S3_KEY_KIND = 's3key';
export const CORS_KIND = 'cors';

export class BucketCaches {
  /** S3 keys by access key id. Unknown keys are not cached (a flood of ids must not grow it). */
  readonly grants = new TtlCache<S3KeyGrant>(30_000);
  /** CORS rules by bucket name (`[]` for a bucket without rules, or none of that name). */
  readonly corsRules = new TtlCache<CorsRule[]>(30_000);

  /** `events`: the authenticator, which LISTENs and passes every invalidation on. */
  constructor(events: { onInvalidation(fn: (kind: string, id: string) => void): void }) {
    events.onInvalidation((kind, id) => this.invalidated(kind, id));
  }

  private invalidated(kind: string, id: string): void {
    if (kind === S3_KEY_KIND) this.grants.drop(id);
    else if (kind === CORS_KIND) this.corsRules.drop(id);
    // Suspension and unsuspension change what every key of the org may do.
    else if (kind === 'org') this.grants.drop();
    else if (kind === 'all') {
      this.grants.drop();
      this.corsRules.drop();
    }
  }
}
