/**
 * Blobs as objects in one bucket of an S3 service: blob (ns, id) is the object
 * `<prefix><ns>/<id>`, and writes in progress live under `<prefix>.tmp/`.
 *
 * Atomicity comes from S3 itself: a PutObject or a completed multipart upload appears
 * whole or not at all, and a failed upload is aborted. When the caller must check the
 * digests before the blob appears (`verify`), the bytes go to a temporary key first and are
 * copied to the final key once checked: a server-side copy, but a second write all the
 * same, and CopyObject stops at 5 GiB, so a verified put is refused past that
 * ('too-large'). Concatenation streams every part back through this process to hash the
 * whole (S3 cannot give an MD5 of a multipart object), so it downloads and uploads the
 * whole object once; fine for pier's sizes, and it has no part-size rules to work around.
 *
 * A crash mid-write leaves a temp key or an unfinished multipart upload, invisible but
 * billed: {@link S3BlobStore.sweepTemp} removes them. The credentials need s3:ListBucket
 * besides object read, write and delete: without it, S3 answers 403 rather than 404 for
 * a missing key, which this store reports as 'backend' instead of 'not-found'.
 */
import { randomUUID } from 'node:crypto';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import {
  AbortMultipartUploadCommand,
  CopyObjectCommand,
  DeleteObjectCommand,
  DeleteObjectsCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListMultipartUploadsCommand,
  type ListMultipartUploadsCommandOutput,
  ListObjectsV2Command,
  S3Client,
  S3ServiceException,
  type _Object,
} from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import {
  BLOB_NAME,
  BlobError,
  assertBlobName,
  assertRange,
  type BlobPutOptions,
  type BlobRange,
  type BlobStore,
  type BlobWriteResult,
} from './blob-store.js';
import { DigestMeter } from './digest-meter.js';
import { errorMessage, watchFailureOrigin, writeFailure } from './stream-failure.js';

const MiB = 1024 * 1024;
/** Upload part size and parallelism: at most 4 × 8 MiB of a body is in memory at once. */
const PART_SIZE = 8 * MiB;
const QUEUE_SIZE = 4;
/** The largest object a single CopyObject can copy. */
export const MAX_COPY_BYTES = 5 * 1024 * MiB;
const TEMP_DIR = '.tmp/';

/** Where the S3 blob store keeps its blobs, and how it signs in. */
export interface S3BlobStoreOptions {
  /** The service's URL, for anything but AWS itself (e.g. http://127.0.0.1:9000). */
  endpoint?: string;
  region: string;
  bucket: string;
  accessKeyId: string;
  secretAccessKey: string;
  /** Address the bucket in the path rather than the host name (most self-hosted services). */
  forcePathStyle?: boolean;
  /** Put every key under this prefix, e.g. 'pier/'; a missing trailing slash is added. */
  prefix?: string;
}

function httpStatus(err: unknown): number | undefined {
  return err instanceof S3ServiceException ? err.$metadata.httpStatusCode : undefined;
}

/** A missing object; a missing bucket is a configuration error, so 'backend'. */
function isMissingObject(err: unknown): boolean {
  if (!(err instanceof S3ServiceException) || err.name === 'NoSuchBucket') return false;
  return err.name === 'NoSuchKey' || err.name === 'NotFound' || httpStatus(err) === 404;
}

function backend(what: string, err: unknown): BlobError {
  return err instanceof BlobError
    ? err
    : new BlobError('backend', `${what}: ${errorMessage(err)}`, { cause: err });
}

/** A CopySource header: bucket and key, each path segment URL-encoded. */
function copySource(bucket: string, key: string): string {
  return [bucket, ...key.split('/')].map(encodeURIComponent).join('/');
}

/** The S3 blob store; see the module comment for the layout and costs. */
export class S3BlobStore implements BlobStore {
  readonly kind = 's3' as const;
  readonly bucket: string;
  /** '' or a prefix ending in '/'. */
  readonly prefix: string;
  private readonly client: S3Client;

  constructor(opts: S3BlobStoreOptions) {
    this.bucket = opts.bucket;
    const prefix = opts.prefix ?? '';
    this.prefix = prefix === '' || prefix.endsWith('/') ? prefix : `${prefix}/`;
    this.client = new S3Client({
      endpoint: opts.endpoint,
      region: opts.region,
      forcePathStyle: opts.forcePathStyle,
      credentials: { accessKeyId: opts.accessKeyId, secretAccessKey: opts.secretAccessKey },
      // Only the checksums S3 requires. By default the SDK adds CRC32 trailers to every
      // upload, which many S3-compatible services reject; our own MD5 covers integrity.
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
    });
  }

  /** The object key of blob (ns, id); throws BlobError 'invalid-id' for a bad name. */
  keyOf(ns: string, id: string): string {
    assertBlobName(ns, 'namespace');
    assertBlobName(id);
    return `${this.prefix}${ns}/${id}`;
  }

  async put(
    ns: string,
    id: string,
    body: Readable,
    opts: BlobPutOptions = {},
  ): Promise<BlobWriteResult> {
    let key: string;
    try {
      key = this.keyOf(ns, id);
    } catch (err) {
      body.destroy(); // the store owns the body once called: it is read to its end or destroyed
      throw err;
    }
    const { verify } = opts;
    // Without verify, an upload to the final key is atomic by itself: no copy needed.
    const maxBytes = verify ? Math.min(opts.maxBytes ?? Infinity, MAX_COPY_BYTES) : opts.maxBytes;
    const meter = new DigestMeter({
      sha256: opts.sha256,
      maxBytes,
      sizeHint: opts.sizeHint,
      highWaterMark: MiB,
    });
    if (!verify) return this.upload(key, body, meter);

    const temp = `${this.prefix}${TEMP_DIR}${randomUUID()}`;
    try {
      const result = await this.upload(temp, body, meter);
      verify(result); // what it throws goes to the caller as it is
      try {
        await this.client.send(
          new CopyObjectCommand({
            Bucket: this.bucket,
            Key: key,
            CopySource: copySource(this.bucket, temp),
          }),
        );
      } catch (err) {
        throw backend(`copying blob ${ns}/${id} into place`, err);
      }
      return result;
    } finally {
      // Best effort: a temp key that outlives this is removed by sweepTemp.
      await this.client
        .send(new DeleteObjectCommand({ Bucket: this.bucket, Key: temp }))
        .catch(() => {});
    }
  }

  async get(ns: string, id: string, range?: BlobRange): Promise<Readable> {
    const key = this.keyOf(ns, id);
    if (range) assertRange(range);
    try {
      const out = await this.client.send(
        new GetObjectCommand({
          Bucket: this.bucket,
          Key: key,
          Range: range ? `bytes=${range.start}-${range.end}` : undefined,
        }),
      );
      if (!(out.Body instanceof Readable)) {
        throw new BlobError('backend', 'the S3 client returned no Node.js stream');
      }
      return out.Body;
    } catch (err) {
      if (isMissingObject(err)) throw new BlobError('not-found', `no blob ${ns}/${id}`);
      // A range starting past the end (or any range of an empty blob): the blob exists, and
      // the filesystem store answers no bytes there too.
      if (range && httpStatus(err) === 416) return Readable.from([]);
      throw backend(`reading blob ${ns}/${id}`, err);
    }
  }

  async stat(ns: string, id: string): Promise<{ size: number } | undefined> {
    const key = this.keyOf(ns, id);
    try {
      const out = await this.client.send(new HeadObjectCommand({ Bucket: this.bucket, Key: key }));
      return { size: out.ContentLength ?? 0 };
    } catch (err) {
      if (isMissingObject(err)) return undefined;
      throw backend(`stat of blob ${ns}/${id}`, err);
    }
  }

  async delete(ns: string, id: string): Promise<void> {
    const key = this.keyOf(ns, id);
    try {
      // S3 answers a delete of a missing key with success: idempotent as it is.
      await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: key }));
    } catch (err) {
      if (!isMissingObject(err)) throw backend(`deleting blob ${ns}/${id}`, err);
    }
  }

  async concat(ns: string, id: string, parts: string[]): Promise<BlobWriteResult> {
    const key = this.keyOf(ns, id);
    for (const part of parts) assertBlobName(part);
    const get = (part: string): Promise<Readable> => this.get(ns, part);
    async function* bytes(): AsyncGenerator<Buffer> {
      for (const part of parts) {
        const stream = await get(part); // a missing part rejects with 'not-found'
        try {
          yield* stream as AsyncIterable<Buffer>;
        } catch (err) {
          throw backend(`reading blob ${ns}/${part}`, err);
        }
      }
    }
    const source = Readable.from(bytes(), { objectMode: false, highWaterMark: MiB });
    // Straight to the final key: the upload appears only once complete, and every error
    // of the source is the backend's (or 'not-found'), since no client body is involved.
    return this.upload(key, source, new DigestMeter({ highWaterMark: MiB }));
  }

  async deleteNamespace(ns: string): Promise<void> {
    assertBlobName(ns, 'namespace');
    try {
      await this.deleteAll(this.listObjects(`${this.prefix}${ns}/`));
    } catch (err) {
      throw backend(`removing namespace ${ns}`, err);
    }
  }

  async *listOlderThan(ns: string, olderThan: Date): AsyncIterable<string> {
    assertBlobName(ns, 'namespace');
    const nsPrefix = `${this.prefix}${ns}/`;
    try {
      for await (const object of this.listObjects(nsPrefix)) {
        const id = object.Key?.slice(nsPrefix.length) ?? '';
        if (BLOB_NAME.test(id) && object.LastModified && object.LastModified < olderThan) {
          yield id;
        }
      }
    } catch (err) {
      throw backend(`listing namespace ${ns}`, err);
    }
  }

  /**
   * Removes temp keys and aborts multipart uploads older than `olderThan`: what a crash
   * mid-put leaves, invisible but still billed by the service. Only keys in this store's
   * layout are touched, so a bucket shared with other data is safe.
   */
  async sweepTemp(olderThan: Date): Promise<number> {
    try {
      const isOld = (o: _Object): boolean => !!o.LastModified && o.LastModified < olderThan;
      let removed = await this.deleteAll(this.listObjects(`${this.prefix}${TEMP_DIR}`, isOld));
      for await (const upload of this.listStaleUploads(olderThan)) {
        await this.client.send(new AbortMultipartUploadCommand({ Bucket: this.bucket, ...upload }));
        removed++;
      }
      return removed;
    } catch (err) {
      throw backend('sweeping temp objects', err);
    }
  }

  /**
   * Streams `source` through `meter` into the object `key` with a managed (multipart when
   * large) upload. The upload reads from the meter while the meter reads the source, so the
   * digests come from the same pass and at most QUEUE_SIZE parts are in memory.
   */
  private async upload(
    key: string,
    source: Readable,
    meter: DigestMeter,
  ): Promise<BlobWriteResult> {
    const upload = new Upload({
      client: this.client,
      params: { Bucket: this.bucket, Key: key, Body: meter },
      partSize: PART_SIZE,
      queueSize: QUEUE_SIZE,
      leavePartsOnError: false, // abort the multipart upload on failure: nothing is left
    });
    const origin = watchFailureOrigin(source, meter);
    const uploading = upload.done().catch((err: unknown) => {
      // The upload stopped reading: fail the meter too, or the pipeline would wait forever.
      const failure = backend(`uploading ${key}`, err);
      meter.destroy(failure);
      throw failure;
    });
    const [fed, uploaded] = await Promise.allSettled([pipeline(source, meter), uploading]);
    // Both have settled, so a failed upload has already been aborted on the service.
    if (fed.status === 'rejected') throw writeFailure(fed.reason, origin, `uploading ${key}`);
    if (uploaded.status === 'rejected') throw uploaded.reason;
    return meter.result();
  }

  /** Every object under `prefix` (and, given `filter`, only those it accepts), page by page. */
  private async *listObjects(
    prefix: string,
    filter: (o: _Object) => boolean = () => true,
  ): AsyncGenerator<_Object> {
    let token: string | undefined;
    do {
      const page = await this.client.send(
        new ListObjectsV2Command({
          Bucket: this.bucket,
          Prefix: prefix,
          Delimiter: '/',
          ContinuationToken: token,
        }),
      );
      for (const object of page.Contents ?? []) if (filter(object)) yield object;
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
  }

  /** Deletes the listed objects 1000 at a time (S3's limit per request); returns how many. */
  private async deleteAll(objects: AsyncIterable<_Object>): Promise<number> {
    let batch: { Key: string }[] = [];
    let deleted = 0;
    const flush = async (): Promise<void> => {
      if (batch.length === 0) return;
      const out = await this.client.send(
        new DeleteObjectsCommand({
          Bucket: this.bucket,
          Delete: { Objects: batch, Quiet: true },
        }),
      );
      const failed = out.Errors?.[0];
      if (failed) throw new Error(`${failed.Key}: ${failed.Code ?? ''} ${failed.Message ?? ''}`);
      deleted += batch.length;
      batch = [];
    };
    for await (const object of objects) {
      if (object.Key === undefined) continue;
      batch.push({ Key: object.Key });
      if (batch.length === 1000) await flush();
    }
    await flush();
    return deleted;
  }

  /** Multipart uploads of this store's keys begun before `olderThan`. */
  private async *listStaleUploads(
    olderThan: Date,
  ): AsyncGenerator<{ Key: string; UploadId: string }> {
    let keyMarker: string | undefined;
    let uploadIdMarker: string | undefined;
    do {
      let page: ListMultipartUploadsCommandOutput;
      try {
        page = await this.client.send(
          new ListMultipartUploadsCommand({
            Bucket: this.bucket,
            Prefix: this.prefix,
            KeyMarker: keyMarker,
            UploadIdMarker: uploadIdMarker,
          }),
        );
      } catch (err) {
        // Some S3-compatible services cannot list uploads: nothing to sweep there, then.
        if (httpStatus(err) === 501) return;
        throw err;
      }
      for (const u of page.Uploads ?? []) {
        if (!u.Key || !u.UploadId || !u.Initiated || u.Initiated >= olderThan) continue;
        if (this.ownsKey(u.Key)) yield { Key: u.Key, UploadId: u.UploadId };
      }
      keyMarker = page.IsTruncated ? page.NextKeyMarker : undefined;
      uploadIdMarker = page.IsTruncated ? page.NextUploadIdMarker : undefined;
    } while (keyMarker);
  }

  /** Whether `key` is one of this store's: a temp key or `<ns>/<id>` under the prefix. */
  private ownsKey(key: string): boolean {
    if (!key.startsWith(this.prefix)) return false;
    const [ns, id, ...rest] = key.slice(this.prefix.length).split('/');
    if (rest.length > 0 || ns === undefined || id === undefined) return false;
    return ns === TEMP_DIR.slice(0, -1) || (BLOB_NAME.test(ns) && BLOB_NAME.test(id));
  }
}
