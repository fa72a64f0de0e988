/**
 * `pier buckets cp`: one object between a bucket and a local file (or stdin/stdout),
 * through a presigned URL, so the bytes go straight to the S3 gateway and never through
 * the JSON API.
 */
import { stat } from 'node:fs/promises';
import path from 'node:path';
import type { Command } from 'commander';
import { apiPath } from './api-client.js';
import type { Presigned } from './buckets-types.js';
import { download, openSource, upload } from './buckets-transfer.js';
import { type CommonOptions, connect, withCommonOptions } from './connect.js';
import { CliError, action } from './errors.js';
import { say } from './output.js';
import { formatBytes, progressWanted } from './progress.js';

interface CpOptions extends CommonOptions {
  contentType?: string;
  progress?: boolean;
}

/** A `bucket:key` argument. */
export interface RemoteRef {
  bucket: string;
  key: string;
}

/**
 * A bucket name (3-63 lowercase letters, digits and hyphens) before the first colon. The
 * three-character minimum keeps Windows drive letters (`C:\…`) local.
 */
const REMOTE = /^([a-z0-9][a-z0-9-]{1,61}[a-z0-9]):(.*)$/s;

/** `bucket:key` → its parts; anything else (a path, `-`) → undefined. */
export function parseRemote(arg: string): RemoteRef | undefined {
  const m = REMOTE.exec(arg);
  return m ? { bucket: m[1] ?? '', key: m[2] ?? '' } : undefined;
}

/** Registers `pier buckets cp`. */
export function registerBucketCp(buckets: Command): void {
  withCommonOptions(
    buckets
      .command('cp')
      .description('copy one object between a bucket and a local file, stdin or stdout')
      .addHelpText(
        'after',
        `
Exactly one side is BUCKET:KEY, the other a local path or - (stdin or stdout).
Uploading to BUCKET: or BUCKET:dir/ appends the file's name to the key; downloading
into a directory keeps the key's last part as the file name. A local path that itself
looks like BUCKET:KEY can be written ./name:with-colon.

Examples:
  pier buckets cp photo.png media:2024/photo.png
  pier buckets cp media:2024/photo.png ./photo.png
  tar c dir | pier buckets cp - backups:dir.tar
  pier buckets cp backups:dir.tar - | tar x`,
      ),
    { json: false },
  )
    .argument('<src>', 'BUCKET:KEY, a local file, or - for stdin')
    .argument('<dst>', 'BUCKET:KEY, a local file or directory, or - for stdout')
    .option('--content-type <type>', 'Content-Type stored with an upload')
    .option('--progress', 'show progress on stderr even when it is not a terminal')
    .option('--no-progress', 'never show progress')
    .action(
      action(async (src: string, dst: string, opts: CpOptions) => {
        const from = parseRemote(src);
        const to = parseRemote(dst);
        if (from && to) {
          throw new CliError('copying between buckets is not supported; one side must be local');
        }
        if (to) return uploadCmd(src, to, opts);
        if (from) return downloadCmd(from, dst, opts);
        throw new CliError(`one side must be BUCKET:KEY (got '${src}' and '${dst}')`);
      }),
    );
}

async function uploadCmd(src: string, to: RemoteRef, opts: CpOptions): Promise<void> {
  let key = to.key;
  if (key === '' || key.endsWith('/')) {
    if (src === '-') throw new CliError(`give the key to store stdin under: ${to.bucket}:KEY`);
    key += path.basename(src);
  }
  const source = await openSource(src);
  const client = await connect(opts);
  const target = await client.call<Presigned>('POST', apiPath`/v1/buckets/${to.bucket}/presign`, {
    op: 'put',
    key,
    ...(opts.contentType ? { contentType: opts.contentType } : {}),
  });
  const where = `${to.bucket}:${key}`;
  const bytes = await upload(target, source, {
    label: `upload ${where}`,
    show: progressWanted(opts.progress),
  });
  say(`Uploaded ${src === '-' ? 'stdin' : src} to ${where} (${formatBytes(bytes)}).`);
}

async function downloadCmd(from: RemoteRef, dst: string, opts: CpOptions): Promise<void> {
  if (opts.contentType) throw new CliError('--content-type only applies to uploads');
  const name = path.posix.basename(from.key);
  if (name === '') throw new CliError(`give the key of one object: ${from.bucket}:KEY`);
  const target = dst !== '-' && (await isDirectory(dst)) ? path.join(dst, name) : dst;
  const client = await connect(opts);
  const signed = await client.call<Presigned>('POST', apiPath`/v1/buckets/${from.bucket}/presign`, {
    op: 'get',
    key: from.key,
  });
  const where = `${from.bucket}:${from.key}`;
  const bytes = await download(signed.url, target, {
    label: `download ${where}`,
    show: progressWanted(opts.progress),
  });
  // Stdout carries the object itself: nothing else may go there.
  if (target !== '-') say(`Downloaded ${where} to ${target} (${formatBytes(bytes)}).`);
}

/** A trailing slash means a directory even before it exists, so the error names it. */
async function isDirectory(p: string): Promise<boolean> {
  if (p.endsWith('/') || p.endsWith(path.sep)) return true;
  return (await stat(p).catch(() => undefined))?.isDirectory() ?? false;
}
