/**
 * Objects of a bucket: metadata rows in PostgreSQL, bytes in the blob store under a
 * fresh random blob id per write. A write becomes visible only when its row commits,
 * after the blob is complete and verified, so a crashed upload never shows half an
 * object; the blob a write replaces is deleted by a durable job in the same transaction.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { Readable } from 'node:stream';
import { sql, type CompiledQuery } from 'kysely';
import { enqueue } from '../../jobs/queue.js';
import type { BlobWriteResult } from '../../objects/blobs/blob-store.js';
import type { Executor } from '../../store/db.js';
import type { ServiceContext } from '../context.js';
import { ObjectError } from './object-error.js';

export interface ObjectMeta {
  key: string;
  size: number;
  etag: string;
  lastModified: Date;
  contentType: string | null;
  metadata: Record<string, string>;
}

export interface PutOptions {
  contentType?: string;
  metadata?: Record<string, string>;
  /** From Content-MD5: the bytes must have this digest (BadDigest otherwise). */
  md5?: Buffer;
  /** From a signed x-amz-content-sha256: the bytes must have this digest. */
  sha256Hex?: string;
  /** From Content-Length or x-amz-decoded-content-length: the bytes must be this many. */
  size?: number;
  /** Extra check of the complete bytes (trailing checksums), before they become visible. */
  verify?: (r: BlobWriteResult) => void;
}

/** Objects up to 5 TiB, as S3; single PUTs up to 5 GiB. */
export const MAX_PUT_BYTES = 5 * 1024 ** 3;
const LAST_CHAR = String.fromCodePoint(0x10ffff);

/** 32 hex characters: random, so no key ever shapes a path, and spread over 256 directories. */
export function newBlobId(): string {
  return randomBytes(16).toString('hex');
}

/** The checks every write makes of its complete bytes before they become visible. */
export function checkDigests(r: BlobWriteResult, opts: PutOptions): void {
  if (opts.size !== undefined && r.size !== opts.size) {
    throw new ObjectError('IncompleteBody', `Expected ${opts.size} bytes, received ${r.size}.`);
  }
  if (opts.md5 && !opts.md5.equals(r.md5)) {
    throw new ObjectError(
      'BadDigest',
      'The Content-MD5 you specified did not match what we received.',
    );
  }
  if (opts.sha256Hex && r.sha256 && r.sha256.toString('hex') !== opts.sha256Hex.toLowerCase()) {
    throw new ObjectError(
      'XAmzContentSHA256Mismatch',
      'The provided x-amz-content-sha256 header does not match what was computed.',
    );
  }
  opts.verify?.(r);
}

type ObjectRow = {
  key: string;
  size: number;
  etag: string;
  last_modified: Date;
  content_type: string | null;
  metadata: Record<string, string>;
  blob_id: string;
};

function toMeta(r: ObjectRow): ObjectMeta {
  return {
    key: r.key,
    size: Number(r.size),
    etag: r.etag,
    lastModified: r.last_modified,
    contentType: r.content_type,
    metadata: r.metadata ?? {},
  };
}

/** Writes the blob, then the row that makes it visible, in one transaction with its cleanup. */
async function commitObject(
  ctx: ServiceContext,
  bucketId: string,
  key: string,
  blobId: string,
  fields: {
    size: number;
    etag: string;
    contentType: string | null;
    metadata: Record<string, string>;
  },
  extra?: (tx: Executor) => Promise<void>,
): Promise<ObjectMeta> {
  try {
    return await ctx.db.transaction().execute(async (tx) => {
      // Writers of one key take turns, so each sees the blob it replaces (even on the
      // first write of a key, when there is no row to lock yet) and schedules its deletion.
      // Bucket ids hold no "/", so "id/key" names exactly one object.
      await sql`SELECT pg_advisory_xact_lock(hashtextextended(${`${bucketId}/${key}`}, 0))`.execute(
        tx,
      );
      const previous = await tx
        .selectFrom('objects')
        .select('blob_id')
        .where('bucket_id', '=', bucketId)
        .where('key', '=', key)
        .forUpdate()
        .executeTakeFirst();
      const row = await tx
        .insertInto('objects')
        .values({
          bucket_id: bucketId,
          key,
          blob_id: blobId,
          size: fields.size,
          etag: fields.etag,
          content_type: fields.contentType,
          metadata: JSON.stringify(fields.metadata),
          last_modified: ctx.clock(),
        })
        .onConflict((oc) =>
          oc.columns(['bucket_id', 'key']).doUpdateSet((eb) => ({
            blob_id: eb.ref('excluded.blob_id'),
            size: eb.ref('excluded.size'),
            etag: eb.ref('excluded.etag'),
            content_type: eb.ref('excluded.content_type'),
            metadata: eb.ref('excluded.metadata'),
            last_modified: eb.ref('excluded.last_modified'),
          })),
        )
        .returning(['key', 'size', 'etag', 'last_modified', 'content_type', 'metadata', 'blob_id'])
        .executeTakeFirstOrThrow();
      if (previous)
        await enqueue(tx, ctx.jobs, 'objects.delete-blob', {
          ns: bucketId,
          blobId: previous.blob_id,
        });
      await extra?.(tx);
      return toMeta(row);
    });
  } catch (err) {
    // The row did not commit: the blob is unreachable, so remove it now.
    await ctx.blobs.delete(bucketId, blobId).catch(() => {});
    throw err;
  }
}

export async function putObject(
  ctx: ServiceContext,
  bucketId: string,
  key: string,
  body: Readable,
  opts: PutOptions = {},
): Promise<ObjectMeta> {
  const blobId = newBlobId();
  const written = await ctx.blobs.put(bucketId, blobId, body, {
    sha256: opts.sha256Hex !== undefined,
    maxBytes: MAX_PUT_BYTES,
    sizeHint: opts.size,
    verify: (r) => checkDigests(r, opts),
  });
  return commitObject(ctx, bucketId, key, blobId, {
    size: written.size,
    etag: `"${written.md5.toString('hex')}"`,
    contentType: opts.contentType ?? null,
    metadata: opts.metadata ?? {},
  });
}

// The lookup every GET and HEAD makes, compiled once per executor instead of per request.
// Harmless at module level: an immutable function of its executor, which keys it weakly.
const headQueries = new WeakMap<Executor, CompiledQuery<ObjectRow>>();

function headQuery(ex: Executor): CompiledQuery<ObjectRow> {
  let q = headQueries.get(ex);
  if (!q) {
    q = ex
      .selectFrom('objects')
      .select(['key', 'size', 'etag', 'last_modified', 'content_type', 'metadata', 'blob_id'])
      .where('bucket_id', '=', '')
      .where('key', '=', '')
      .compile();
    headQueries.set(ex, q);
  }
  return q;
}

export async function headObject(
  ex: Executor,
  bucketId: string,
  key: string,
): Promise<(ObjectMeta & { blobId: string }) | undefined> {
  const q = headQuery(ex);
  const { rows } = await ex.executeQuery<ObjectRow>({ ...q, parameters: [bucketId, key] });
  const row = rows[0];
  return row ? { ...toMeta(row), blobId: row.blob_id } : undefined;
}

export async function getObject(
  ctx: ServiceContext,
  bucketId: string,
  key: string,
  range?: { start: number; end: number },
): Promise<{ meta: ObjectMeta; body: Readable }> {
  const meta = await headObject(ctx.db, bucketId, key);
  if (!meta) throw new ObjectError('NoSuchKey', 'The specified key does not exist.', { Key: key });
  return { meta, body: await openObject(ctx, bucketId, meta, range) };
}

/**
 * The bytes of the version `head` describes (from `headObject`): a GET that has read the
 * row for its headers and preconditions sends the very bytes of that row, without a
 * second lookup that a concurrent write could answer with another version.
 */
export function openObject(
  ctx: ServiceContext,
  bucketId: string,
  head: ObjectMeta & { blobId: string },
  range?: { start: number; end: number },
): Promise<Readable> {
  // The whole object is asked for as a range too, so the store knows how much it reads.
  const whole = head.size > 0 ? { start: 0, end: head.size - 1 } : undefined;
  return ctx.blobs.get(bucketId, head.blobId, range ?? whole);
}

/** Deletes keys; answers the ones that existed. Their bytes go by durable job. */
export async function deleteObjects(
  ctx: ServiceContext,
  bucketId: string,
  keys: string[],
): Promise<string[]> {
  if (keys.length === 0) return [];
  return ctx.db.transaction().execute(async (tx) => {
    const rows = await tx
      .deleteFrom('objects')
      .where('bucket_id', '=', bucketId)
      .where('key', 'in', keys)
      .returning(['key', 'blob_id'])
      .execute();
    for (const r of rows)
      await enqueue(tx, ctx.jobs, 'objects.delete-blob', { ns: bucketId, blobId: r.blob_id });
    return rows.map((r) => r.key);
  });
}

export interface ListOptions {
  prefix?: string;
  delimiter?: string;
  /** Exclusive: list keys after this one (continuation and StartAfter). */
  after?: string;
  limit: number;
}

export interface ListPage {
  objects: ObjectMeta[];
  commonPrefixes: string[];
  truncated: boolean;
  /** The last key or prefix of this page: the next page starts after it. */
  last?: string;
}

/**
 * One page of keys in byte order. With a delimiter, keys that share the part of their
 * name up to the delimiter are rolled into one common prefix, which counts once toward
 * the limit, as S3 does; the scan then jumps past every key under that prefix.
 */
export async function listObjects(
  ex: Executor,
  bucketId: string,
  opts: ListOptions,
): Promise<ListPage> {
  const prefix = opts.prefix ?? '';
  const objects: ObjectMeta[] = [];
  const commonPrefixes: string[] = [];
  let after = opts.after !== undefined && opts.after > prefix ? opts.after : undefined;
  // A page that ended on a common prefix continues after it (its `last`): skip every key
  // under it, or the next page would roll them into the same prefix again, forever.
  if (after !== undefined && opts.delimiter && after.startsWith(prefix)) {
    const rest = after.slice(prefix.length);
    const cut = rest.indexOf(opts.delimiter);
    if (cut >= 0 && cut === rest.length - opts.delimiter.length) after += LAST_CHAR;
  }
  let last: string | undefined;
  const upper = prefix ? prefix + LAST_CHAR : undefined;
  for (;;) {
    const batch = Math.min(1000, opts.limit - objects.length - commonPrefixes.length + 1);
    let q = ex
      .selectFrom('objects')
      .select(['key', 'size', 'etag', 'last_modified', 'content_type', 'metadata', 'blob_id'])
      .where('bucket_id', '=', bucketId);
    if (after !== undefined) q = q.where('key', '>', after);
    if (prefix) {
      q = q
        .where('key', '>=', prefix)
        .where('key', '<', upper!)
        .where(sql<boolean>`starts_with(key, ${prefix})`);
    }
    const rows = await q.orderBy('key').limit(batch).execute();
    let jumped = false;
    for (const row of rows) {
      if (objects.length + commonPrefixes.length === opts.limit) {
        return { objects, commonPrefixes, truncated: true, last };
      }
      const rest = row.key.slice(prefix.length);
      const cut = opts.delimiter ? rest.indexOf(opts.delimiter) : -1;
      if (cut >= 0) {
        last = prefix + rest.slice(0, cut + opts.delimiter!.length);
        commonPrefixes.push(last);
        after = last + LAST_CHAR; // skip every other key under this prefix
        jumped = true;
        break;
      }
      objects.push(toMeta(row));
      last = after = row.key;
    }
    if (!jumped && rows.length < batch) return { objects, commonPrefixes, truncated: false, last };
  }
}

export async function countObjects(ex: Executor, bucketId: string): Promise<number> {
  const { n } = await ex
    .selectFrom('objects')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('bucket_id', '=', bucketId)
    .executeTakeFirstOrThrow();
  return Number(n);
}

export { commitObject };

/** The multipart ETag of S3: md5 of the parts' binary md5s, then "-" and the part count. */
export function multipartEtag(partEtags: string[]): string {
  const h = createHash('md5');
  for (const e of partEtags) h.update(Buffer.from(e.replace(/"/g, ''), 'hex'));
  return `"${h.digest('hex')}-${partEtags.length}"`;
}
