/**
 * Choosing the blob store from configuration: the data dir unless an S3 URL is given.
 */
import path from 'node:path';
import type { BlobStore } from './blob-store.js';
import { FsBlobStore } from './fs-blob-store.js';
import type { S3BlobStoreOptions } from './s3-blob-store.js';

/** What {@link blobStoreFromConfig} reads. */
export interface BlobStoreConfig {
  dataDir: string;
  /** An `s3://` URL as described at {@link parseObjectStoreUrl}; unset means the data dir. */
  objectStoreUrl?: string;
  accessKeyId?: string;
  secretAccessKey?: string;
  /** The region, unless the URL names one; 'us-east-1' when neither does. */
  region?: string;
}

/** Where an `s3://` URL points: the S3 store's options without the credentials. */
export type ObjectStoreLocation = Omit<S3BlobStoreOptions, 'accessKeyId' | 'secretAccessKey'>;

const QUERY_KEYS = new Set(['endpoint', 'region', 'forcePathStyle']);
/** S3's bucket naming rules, loosely: lowercase, digits, dots and dashes, 3 to 63 long. */
const BUCKET_NAME = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;

function flag(value: string, name: string): boolean {
  if (['1', 'true', 'yes'].includes(value)) return true;
  if (['0', 'false', 'no'].includes(value)) return false;
  throw new Error(`object store URL: ${name} must be 1 or 0, not ${JSON.stringify(value)}`);
}

/**
 * Parses an object store URL:
 *
 *   s3://BUCKET[/PREFIX][?endpoint=URL][&region=REGION][&forcePathStyle=1|0]
 *
 * - BUCKET: the bucket that holds every blob.
 * - PREFIX: optional key prefix (may contain slashes; percent-encoding is decoded), so that
 *   the bucket can be shared: blobs become `PREFIX/<ns>/<id>`.
 * - endpoint: the service's http(s) URL, for anything but AWS itself (MinIO, Garage,
 *   another pier, ...). Without it, the SDK's AWS endpoint for the region is used.
 * - region: overrides `fallbackRegion`; default 'us-east-1' (what most other services expect).
 * - forcePathStyle: address the bucket in the path (http://host/bucket/key) instead of the
 *   host name; defaults to 1 when an endpoint is given, since self-hosted services rarely
 *   have wildcard DNS, and to 0 for AWS.
 *
 * Credentials are never part of the URL (URLs end up in logs); they come separately.
 * Example: `s3://pier-blobs/prod?endpoint=http://127.0.0.1:9000&region=eu-1`.
 */
export function parseObjectStoreUrl(url: string, fallbackRegion?: string): ObjectStoreLocation {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new Error(`object store URL is not a URL: ${JSON.stringify(url)}`);
  }
  if (parsed.protocol !== 's3:') {
    throw new Error(`object store URL must start with s3://, not ${parsed.protocol}//`);
  }
  if (parsed.username || parsed.password) {
    throw new Error('object store URL must not hold credentials; configure them separately');
  }
  const bucket = parsed.hostname;
  if (!BUCKET_NAME.test(bucket)) {
    throw new Error(`object store URL: ${JSON.stringify(bucket)} is not a valid bucket name`);
  }
  for (const key of parsed.searchParams.keys()) {
    if (!QUERY_KEYS.has(key)) {
      throw new Error(
        `object store URL: unknown parameter ${JSON.stringify(key)} ` +
          `(known: ${[...QUERY_KEYS].join(', ')})`,
      );
    }
  }
  const endpoint = parsed.searchParams.get('endpoint') ?? undefined;
  if (endpoint !== undefined && !/^https?:\/\/[^/]/.test(endpoint)) {
    throw new Error(`object store URL: endpoint must be an http(s) URL, not ${endpoint}`);
  }
  const pathStyle = parsed.searchParams.get('forcePathStyle');
  const prefix = decodeURIComponent(parsed.pathname.replace(/^\/+/, '')).replace(/\/*$/, '');
  return {
    bucket,
    endpoint,
    region: parsed.searchParams.get('region') ?? fallbackRegion ?? 'us-east-1',
    forcePathStyle: pathStyle === null ? endpoint !== undefined : flag(pathStyle, 'forcePathStyle'),
    prefix: prefix === '' ? '' : `${prefix}/`,
  };
}

/**
 * The blob store the configuration asks for: an S3BlobStore when `objectStoreUrl`
 * is set (which then needs both credentials), else an {@link FsBlobStore} under
 * `<dataDir>/objects`, opened (created, stale temp files swept).
 */
export async function blobStoreFromConfig(opts: BlobStoreConfig): Promise<BlobStore> {
  if (!opts.objectStoreUrl) return FsBlobStore.open(path.join(opts.dataDir, 'objects'));
  const location = parseObjectStoreUrl(opts.objectStoreUrl, opts.region);
  if (!opts.accessKeyId || !opts.secretAccessKey) {
    throw new Error('an S3 object store needs an access key id and a secret access key');
  }
  // Loaded only here: the AWS SDK costs some 20 MiB of memory on a platform that stores
  // its objects on local disk, as one on a single machine does.
  const { S3BlobStore } = await import('./s3-blob-store.js');
  return new S3BlobStore({
    ...location,
    accessKeyId: opts.accessKeyId,
    secretAccessKey: opts.secretAccessKey,
  });
}
