/**
 * `pier machines cp`: one file between this computer and a machine, through
 * `GET /v1/machines/:id/files?path=` (the file's bytes) and `PUT` of the same (the body is
 * the file). Both directions stream; a download takes its final name only once every
 * byte is on disk.
 */
import { stat } from 'node:fs/promises';
import path from 'node:path';
import type { Command } from 'commander';
import { apiPath, errorOfResponse, rawFetch } from './api-client.js';
import { type CommonOptions, withCommonOptions } from './connect.js';
import { CliError, NetworkError, action } from './errors.js';
import { type Credentials, credentials } from './machines-common.js';
import { counted, emptyBody, openSource, putStream, toFile, toStdout } from './byte-streams.js';
import { say } from './output.js';
import { Progress, formatBytes, progressWanted } from './progress.js';

interface CpOptions extends CommonOptions {
  progress?: boolean;
}

/** A `MACHINE:/path` argument. */
export interface MachinePath {
  machineId: string;
  path: string;
}

/** A machine id before the first colon; ids are `mch-` and lowercase letters and digits. */
const REMOTE = /^(mch-[A-Za-z0-9_-]+):(.*)$/s;

/** `mch-…:/path` → its parts; anything else (a local path, `-`) → undefined. */
export function parseMachinePath(arg: string): MachinePath | undefined {
  const m = REMOTE.exec(arg);
  if (!m) return undefined;
  const p = m[2] ?? '';
  if (!p.startsWith('/')) throw new CliError(`give an absolute path on the machine: ${m[1]}:/…`);
  return { machineId: m[1] ?? '', path: p };
}

/** Registers `pier machines cp`. */
export function registerMachineCp(machines: Command): void {
  withCommonOptions(
    machines
      .command('cp')
      .description('copy one file between this computer and a machine')
      .addHelpText(
        'after',
        `
Exactly one side is MACHINE:/ABSOLUTE/PATH, the other a local path or - (stdin or
stdout). Uploading to MACHINE:/dir/ appends the file's name; downloading into a
directory keeps the remote name.

Examples:
  pier machines cp ./config.json mch-abc:/data/config.json
  pier machines cp mch-abc:/var/log/app.log .
  pier machines cp mch-abc:/data/dump.sql - | gzip > dump.sql.gz`,
      ),
    { json: false },
  )
    .argument('<src>', 'MACHINE:/PATH, a local file, or - for stdin')
    .argument('<dst>', 'MACHINE:/PATH, a local file or directory, or - for stdout')
    .option('--progress', 'show progress on stderr even when it is not a terminal')
    .option('--no-progress', 'never show progress')
    .action(
      action(async (src: string, dst: string, opts: CpOptions) => {
        const from = parseMachinePath(src);
        const to = parseMachinePath(dst);
        if (from && to) throw new CliError('one side must be local; copy through this computer');
        if (!from && !to) {
          throw new CliError(`one side must be MACHINE:/PATH (got '${src}' and '${dst}')`);
        }
        const creds = await credentials(opts);
        if (to) return upload(creds, src, to, opts);
        if (from) return download(creds, from, dst, opts);
      }),
    );
}

function filesUrl(creds: Credentials, ref: MachinePath): string {
  return `${creds.apiUrl}${apiPath`/v1/machines/${ref.machineId}/files`}?${new URLSearchParams({ path: ref.path })}`;
}

async function upload(
  creds: Credentials,
  src: string,
  to: MachinePath,
  opts: CpOptions,
): Promise<void> {
  let target = to;
  if (to.path.endsWith('/')) {
    if (src === '-') throw new CliError(`give the file's path on the machine: ${to.machineId}:/…`);
    target = { ...to, path: to.path + path.basename(src) };
  }
  const source = await openSource(src);
  const where = `${target.machineId}:${target.path}`;
  const progress = new Progress({
    label: `upload ${where}`,
    total: source.size,
    enabled: progressWanted(opts.progress),
  });
  const headers: Record<string, string> = {
    authorization: `Bearer ${creds.apiKey}`,
    'content-type': 'application/octet-stream',
    accept: 'application/json',
  };
  await putStream(
    (url, init) => rawFetch(creds.apiUrl, url, init),
    filesUrl(creds, target),
    headers,
    source,
    progress,
    errorOfResponse,
  );
  say(`Copied ${src === '-' ? 'stdin' : src} to ${where} (${formatBytes(progress.bytes)}).`);
}

async function download(
  creds: Credentials,
  from: MachinePath,
  dst: string,
  opts: CpOptions,
): Promise<void> {
  const name = path.posix.basename(from.path);
  if (name === '' || from.path.endsWith('/')) {
    throw new CliError(`give the path of one file: ${from.machineId}:/…`);
  }
  const target = dst !== '-' && (await isDirectory(dst)) ? path.join(dst, name) : dst;
  const res = await rawFetch(creds.apiUrl, filesUrl(creds, from), {
    headers: { authorization: `Bearer ${creds.apiKey}` },
  });
  if (!res.ok) throw await errorOfResponse(res);
  const length = res.headers.get('content-length');
  const total = length === null ? undefined : Number(length);
  const where = `${from.machineId}:${from.path}`;
  const progress = new Progress({
    label: `download ${where}`,
    total,
    enabled: progressWanted(opts.progress),
  });
  const chunks = counted(res.body ?? emptyBody(), progress);
  // A connection cut at the wrong moment can look like a clean end of a shorter body.
  const checkComplete = () => {
    if (total !== undefined && progress.bytes !== total) {
      throw new NetworkError(`the download ended early: ${progress.bytes} of ${total} bytes`);
    }
  };
  try {
    if (target === '-') await toStdout(chunks);
    else await toFile(chunks, target, checkComplete);
  } catch (err) {
    progress.abort();
    const e = err as NodeJS.ErrnoException;
    if (typeof e.syscall === 'string') throw new CliError(`cannot write ${target}: ${e.code}`);
    throw err;
  }
  progress.finish();
  // Stdout carries the file itself: nothing else may go there.
  if (target !== '-') say(`Copied ${where} to ${target} (${formatBytes(progress.bytes)}).`);
}

/** An error answer as the API client reports it (`pier: message (code)`). */
/** A trailing slash means a directory even before it exists, so the error names it. */
async function isDirectory(p: string): Promise<boolean> {
  if (p.endsWith('/') || p.endsWith(path.sep)) return true;
  return (await stat(p).catch(() => undefined))?.isDirectory() ?? false;
}
