/**
 * Buckets for the object benchmarks, made through pier's own API the way a customer makes
 * them: `POST /v1/buckets`, then S3 credentials (`POST /v1/buckets/<name>/credentials`) or
 * a presigned URL. `deleteBenchBucket()` removes the bucket (force) and waits until pier's
 * purge job has removed its bytes from the data dir, so that a later measurement does not
 * share the disk with the deletion of gigabytes.
 */
import { randomBytes } from 'node:crypto';
import { access, readdir } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { call, type BenchOrg, type BenchPlatform } from './platform.js';

/** What the S3 load worker needs to reach a bucket (the SDK's client options). */
export interface S3Target {
  endpoint: string;
  region: string;
  bucket: string;
  accessKeyId: string;
  secretAccessKey: string;
}

export interface BenchBucket {
  /** The bucket's id: the namespace of its blobs in the blob store. */
  id: string;
  name: string;
  target: S3Target;
}

/** How long the purge of a deleted bucket may take before the benchmark fails. */
const PURGE_LIMIT_MS = 180_000;

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function field(body: unknown, name: string, route: string): string {
  const value = isRecord(body) ? body[name] : undefined;
  if (typeof value !== 'string' || value === '') {
    throw new Error(`${route} answered without ${name}: ${JSON.stringify(body)}`);
  }
  return value;
}

/** A new bucket named `<prefix>-<random>` with fresh S3 credentials. */
export async function createBenchBucket(
  p: BenchPlatform,
  org: BenchOrg,
  prefix: string,
): Promise<BenchBucket> {
  const name = `${prefix}-${randomBytes(4).toString('hex')}`;
  const created = await call(p.url, org.token, 'POST', '/v1/buckets', { name }, 201);
  const id = field(created, 'id', 'POST /v1/buckets');
  const route = `/v1/buckets/${name}/credentials`;
  const creds = await call(p.url, org.token, 'POST', route, undefined, 201);
  if (!isRecord(creds) || creds.forcePathStyle !== true || creds.bucket !== name) {
    throw new Error(`POST ${route} answered an unexpected body: ${JSON.stringify(creds)}`);
  }
  return {
    id,
    name,
    target: {
      endpoint: field(creds, 'endpoint', route),
      region: field(creds, 'region', route),
      bucket: name,
      accessKeyId: field(creds, 'accessKeyId', route),
      secretAccessKey: field(creds, 'secretAccessKey', route),
    },
  };
}

/** A presigned GET URL of `key`, valid for an hour. */
export async function presignGet(
  p: BenchPlatform,
  org: BenchOrg,
  bucket: BenchBucket,
  key: string,
): Promise<string> {
  const route = `/v1/buckets/${bucket.name}/presign`;
  const body = await call(p.url, org.token, 'POST', route, { key, expiresInS: 3600 });
  return field(body, 'url', route);
}

/**
 * Deletes the bucket and its objects (force=true), then waits until the blobs are gone from
 * `<dataDir>/objects/<id>` and from the store's trash in `<dataDir>/objects/.tmp`.
 */
export async function deleteBenchBucket(
  p: BenchPlatform,
  org: BenchOrg,
  bucket: BenchBucket,
): Promise<void> {
  await call(p.url, org.token, 'DELETE', `/v1/buckets/${bucket.name}?force=true`);
  const objects = path.join(p.dataDir, 'objects');
  const deadline = Date.now() + PURGE_LIMIT_MS;
  for (;;) {
    const live = await access(path.join(objects, bucket.id)).then(
      () => true,
      () => false,
    );
    const trash = await readdir(path.join(objects, '.tmp')).catch(() => [] as string[]);
    if (!live && !trash.some((name) => name.startsWith(`trash-${bucket.id}-`))) return;
    if (Date.now() > deadline) {
      throw new Error(
        `the blobs of deleted bucket ${bucket.name} were still in ${objects} after ${PURGE_LIMIT_MS / 1000} s`,
      );
    }
    await sleep(100);
  }
}

/**
 * Runs `fn` with a fresh bucket and deletes the bucket afterwards (waiting for its purge),
 * whether `fn` succeeded or not; a failure of `fn` is the one reported.
 */
export async function withBenchBucket<T>(
  p: BenchPlatform,
  org: BenchOrg,
  prefix: string,
  fn: (bucket: BenchBucket) => Promise<T>,
): Promise<T> {
  const bucket = await createBenchBucket(p, org, prefix);
  let result: T;
  try {
    result = await fn(bucket);
  } catch (err) {
    await deleteBenchBucket(p, org, bucket).catch(() => {});
    throw err;
  }
  await deleteBenchBucket(p, org, bucket);
  return result;
}
