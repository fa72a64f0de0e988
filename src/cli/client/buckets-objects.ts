/** `pier buckets presign|ls|rm`: objects through the JSON API (spec 4.5). */
import { type Command, InvalidArgumentError } from 'commander';
import type { ApiClient } from './api-client.js';
import { apiPath } from './api-client.js';
import type { DeletedObjects, ObjectEntry, ObjectPage, Presigned } from './buckets-types.js';
import { type CommonOptions, connect, withCommonOptions } from './connect.js';
import { CliError, action } from './errors.js';
import { printJson, printTable, say, when } from './output.js';
import { formatBytes } from './progress.js';

interface PresignOptions extends CommonOptions {
  put?: boolean;
  contentType?: string;
  expires?: number;
}

interface LsOptions extends CommonOptions {
  prefix?: string;
  pageSize: number;
}

/** The most keys the API deletes in one call. */
const MAX_KEYS_PER_DELETE = 1000;
/** Keys travel in the query string; proxies commonly refuse request lines over 8 KiB. */
const MAX_QUERY_CHARS = 6000;

/** Registers `pier buckets presign`, `ls` and `rm`. */
export function registerBucketObjects(buckets: Command): void {
  withCommonOptions(
    buckets
      .command('presign')
      .description('print a presigned URL to download (or, with --put, upload) one object'),
  )
    .argument('<bucket>', 'bucket name')
    .argument('<key>', 'object key')
    .option('--put', 'a URL to upload with PUT instead of one to download')
    .option('--content-type <type>', 'with --put: the Content-Type the upload must send')
    .option('--expires <seconds>', 'validity in seconds, 1-604800 (default: 900)', integer)
    .action(
      action(async (bucket: string, key: string, opts: PresignOptions) => {
        if (opts.contentType && !opts.put) throw new CliError('--content-type goes with --put');
        const signed = await (
          await connect(opts)
        ).call<Presigned>('POST', apiPath`/v1/buckets/${bucket}/presign`, {
          op: opts.put ? 'put' : 'get',
          key,
          ...(opts.expires !== undefined ? { expiresInS: opts.expires } : {}),
          ...(opts.contentType ? { contentType: opts.contentType } : {}),
        });
        if (opts.json) return printJson(signed);
        // The URL alone on the first line, so `$(pier buckets presign …)` works for GET.
        say(signed.url);
        const headers = Object.entries(signed.requiredHeaders);
        if (headers.length > 0) {
          say('Send these headers exactly:', ...headers.map(([k, v]) => `  ${k}: ${v}`));
        }
      }),
    );

  withCommonOptions(buckets.command('ls').description('list the objects of a bucket'))
    .argument('<bucket>', 'bucket name')
    .option('--prefix <prefix>', 'only keys starting with this')
    .option('--page-size <n>', 'objects per API request, 1-1000', integer, 1000)
    .action(
      action(async (bucket: string, opts: LsOptions) => {
        const objects = await listAll(await connect(opts), bucket, opts);
        if (opts.json) return printJson({ bucket, objects });
        printTable(
          ['SIZE', 'MODIFIED', 'KEY'],
          objects.map((o) => [formatBytes(o.sizeBytes), when(o.lastModified), o.key]),
          opts.prefix === undefined
            ? `No objects in ${bucket}.`
            : `No objects under '${opts.prefix}' in ${bucket}.`,
        );
      }),
    );

  withCommonOptions(buckets.command('rm').description('delete objects'), { json: false })
    .argument('<bucket>', 'bucket name')
    .argument('<keys...>', 'object keys')
    .action(
      action(async (bucket: string, keys: string[], opts: CommonOptions) => {
        const client = await connect(opts);
        const deleted = new Set<string>();
        for (const batch of batches([...new Set(keys)])) {
          const query = batch.map((k) => `key=${encodeURIComponent(k)}`).join('&');
          const answer = await client.call<DeletedObjects>(
            'DELETE',
            `${apiPath`/v1/buckets/${bucket}/objects`}?${query}`,
          );
          for (const k of answer.deleted) deleted.add(k);
        }
        for (const k of keys) {
          if (deleted.has(k)) say(`Deleted ${bucket}:${k}`);
          // Deleting is idempotent, as in S3: a missing key is worth a note, not a failure.
          else process.stderr.write(`Note: no object ${bucket}:${k}\n`);
        }
      }),
    );
}

/** Follows `nextCursor` until the listing ends. */
async function listAll(client: ApiClient, bucket: string, opts: LsOptions): Promise<ObjectEntry[]> {
  const objects: ObjectEntry[] = [];
  let cursor: string | undefined;
  do {
    const query = new URLSearchParams({ limit: String(opts.pageSize) });
    if (opts.prefix !== undefined) query.set('prefix', opts.prefix);
    if (cursor !== undefined) query.set('cursor', cursor);
    const page = await client.call<ObjectPage>(
      'GET',
      `${apiPath`/v1/buckets/${bucket}/objects`}?${query.toString()}`,
    );
    objects.push(...page.objects);
    cursor = page.nextCursor;
  } while (cursor !== undefined);
  return objects;
}

/** Splits keys into groups the API and any proxy in front of it will take in one request. */
function* batches(keys: string[]): Generator<string[]> {
  let batch: string[] = [];
  let chars = 0;
  for (const key of keys) {
    const size = encodeURIComponent(key).length + 5;
    if (
      batch.length > 0 &&
      (batch.length >= MAX_KEYS_PER_DELETE || chars + size > MAX_QUERY_CHARS)
    ) {
      yield batch;
      batch = [];
      chars = 0;
    }
    batch.push(key);
    chars += size;
  }
  if (batch.length > 0) yield batch;
}

/** A whole number for an option, or commander's own "invalid argument" error. */
function integer(value: string): number {
  if (!/^\d+$/.test(value)) throw new InvalidArgumentError('not a whole number');
  return Number(value);
}
