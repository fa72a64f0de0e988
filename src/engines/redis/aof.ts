/**
 * The multi-part AOF of Redis 7 as the engine's archive: a manifest naming a base (an
 * RDB snapshot) and incremental files of commands, with a `#TS:<unix seconds>` line
 * before the first write of every second. Forks copy it, cut it at a second with
 * redis-check-aof, and start a server on the copy.
 */
import { execFile } from 'node:child_process';
import { constants } from 'node:fs';
import { mkdir, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import { EngineError } from '../engine.js';
import { copyRegularFile, fsyncPath, openNoFollow, writeAtomic } from './files.js';
import { AOF_BASENAME } from './paths.js';

/** One line of the manifest: `file <name> seq <n> type <b|h|i>`. */
export interface ManifestEntry {
  file: string;
  seq: number;
  /** b: base, h: history (about to be deleted), i: incremental. */
  type: 'b' | 'h' | 'i';
}

/**
 * Names Redis gives AOF files. Only these are read: a manifest is the server's to write,
 * and must not point root at any other file.
 */
const AOF_FILE = /^appendonly\.aof\.\d+\.(base\.(rdb|aof)|incr\.aof)$/;

/** Parses a manifest; throws on a line it does not understand. */
export function parseManifest(text: string): ManifestEntry[] {
  const entries: ManifestEntry[] = [];
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue;
    const words = line.trim().split(/\s+/);
    const fields = new Map<string, string>();
    for (let i = 0; i + 1 < words.length; i += 2) fields.set(words[i] ?? '', words[i + 1] ?? '');
    const file = fields.get('file');
    const seq = Number(fields.get('seq'));
    const type = fields.get('type');
    if (
      !file ||
      !AOF_FILE.test(file) ||
      !Number.isSafeInteger(seq) ||
      !/^[bhi]$/.test(type ?? '')
    ) {
      // The line itself is not quoted: the message may reach a customer.
      throw new EngineError('failed', `unreadable line ${entries.length + 1} in an AOF manifest`);
    }
    entries.push({ file, seq, type: type as ManifestEntry['type'] });
  }
  return entries;
}

/** The text of a manifest. */
export function renderManifest(entries: ManifestEntry[]): string {
  return entries.map((e) => `file ${e.file} seq ${e.seq} type ${e.type}\n`).join('');
}

const manifestOf = (aofDir: string) => path.join(aofDir, `${AOF_BASENAME}.manifest`);

/** The manifest of the AOF in `aofDir`, or undefined when there is none. */
export async function readManifest(aofDir: string): Promise<ManifestEntry[] | undefined> {
  let text: string;
  try {
    const handle = await openNoFollow(manifestOf(aofDir));
    try {
      text = await handle.readFile('utf8');
    } finally {
      await handle.close();
    }
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  return parseManifest(text);
}

/**
 * Copies the AOF of a possibly running server from `src` to `dst` (replaced): the
 * manifest is read first and its files are copied in its order, so the copy of the
 * incremental file being appended, taken last, is a prefix of the history (at worst cut
 * inside a command, which loading with aof-load-truncated drops). A rewrite that swaps
 * files meanwhile makes a file vanish; the copy is then made again. Files are opened
 * without following links and, with `expectUid`, must belong to that user (the server's).
 * False when `src` holds no AOF.
 */
export async function copyAof(src: string, dst: string, expectUid?: number): Promise<boolean> {
  for (let attempt = 1; ; attempt++) {
    const entries = await readManifest(src);
    if (!entries) return false;
    const live = entries.filter((e) => e.type !== 'h');
    await rm(dst, { recursive: true, force: true });
    await mkdir(dst, { recursive: true, mode: 0o700 });
    try {
      for (const e of live) {
        await copyRegularFile(path.join(src, e.file), path.join(dst, e.file), expectUid);
      }
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT' && attempt < 3) continue;
      throw err;
    }
    await writeAtomic(manifestOf(dst), renderManifest(live), 0o600);
    return true;
  }
}

/** The unix second of the `#TS:` line an incremental file starts with, if it starts with one. */
async function firstTimestamp(file: string): Promise<number | undefined> {
  const handle = await openNoFollow(file);
  try {
    const buf = Buffer.alloc(64);
    const { bytesRead } = await handle.read(buf, 0, buf.length, 0);
    const m = /^#TS:(\d+)\r\n/.exec(buf.toString('latin1', 0, bytesRead));
    return m ? Number(m[1]) : undefined;
  } finally {
    await handle.close();
  }
}

function runCheckAof(bin: string, args: string[]): Promise<{ ok: boolean; output: string }> {
  return new Promise((resolve) => {
    execFile(
      bin,
      args,
      { env: { PATH: '/usr/bin:/bin', LANG: 'C' }, timeout: 60 * 60_000, maxBuffer: 64 << 20 },
      (err, stdout, stderr) => resolve({ ok: !err, output: `${stdout}${stderr}` }),
    );
  });
}

/**
 * Cuts the AOF in `aofDir` after unix second `toSecond`: what remains is the base and
 * every command up to the first `#TS:` line later than `toSecond`.
 *
 * redis-check-aof does the cut inside a file, but refuses when the cut falls at the very
 * start of an incremental file or in one that is not the last; those later files are
 * dropped here first (a file usually starts with its first write's `#TS:` line; one that
 * does not, or is empty, is dropped when the checker names an earlier file as the cut's). A copy that ends
 * inside a command (taken while the server wrote) fails the check; that torn tail is cut
 * where the checker says the file stops being valid, as loading with aof-load-truncated
 * would, and the check runs again. Runs as root, so `aofDir` must be root's own copy.
 */
export async function truncateAof(
  aofDir: string,
  toSecond: number,
  checkAof: string,
): Promise<void> {
  let entries = (await readManifest(aofDir)) ?? [];
  const incr = entries.filter((e) => e.type === 'i');
  let keep = incr.length;
  for (let i = 0; i < incr.length; i++) {
    const ts = await firstTimestamp(path.join(aofDir, incr[i]!.file));
    if (ts !== undefined && ts > toSecond) {
      keep = i;
      break;
    }
  }
  /** Drops the incremental files from index `from` on (manifest first). */
  const dropFrom = async (from: number) => {
    const dropped = new Set(incr.slice(from).map((e) => e.file));
    entries = entries.filter((e) => !dropped.has(e.file));
    await writeAtomic(manifestOf(aofDir), renderManifest(entries), 0o600);
    for (const file of dropped) await rm(path.join(aofDir, file), { force: true });
  };
  if (keep < incr.length) await dropFrom(keep);
  if (keep === 0) return; // only the base is left
  const args = ['--truncate-to-timestamp', String(toSecond), manifestOf(aofDir)];
  let run = await runCheckAof(checkAof, args);
  for (let attempt = 0; !run.ok && attempt < 2; attempt++) {
    // The cut is in a file followed by one without a leading `#TS:` (its first writes
    // were in the second of the last annotation before it, as after a rewrite or an
    // empty new file): everything after the cut's file is later, so it goes.
    const notLast = /Failed to truncate AOF (\S+) to timestamp \d+ .*not the last file/.exec(
      run.output,
    );
    const at = notLast ? incr.findIndex((e) => path.basename(notLast[1]!) === e.file) : -1;
    const torn = /filename=(\S+), size=\d+, ok_up_to=(\d+)/.exec(run.output);
    const last = entries.filter((e) => e.type === 'i').at(-1);
    if (at >= 0 && at + 1 < keep) {
      keep = at + 1;
      await dropFrom(keep);
    } else if (torn && last && torn[1] === last.file) {
      const handle = await openNoFollow(path.join(aofDir, last.file), constants.O_WRONLY);
      try {
        await handle.truncate(Number(torn[2]));
      } finally {
        await handle.close();
      }
    } else {
      break;
    }
    run = await runCheckAof(checkAof, args);
  }
  if (!run.ok) {
    throw new EngineError('failed', `redis-check-aof could not cut the AOF:\n${run.output.trim()}`);
  }
}

/**
 * The oldest moment the AOF in `aofDir` can restore: when its base was written (the base
 * holds the data as of then), or, without a base, its first `#TS:` second. Undefined
 * when there is no AOF.
 */
export async function aofOldest(aofDir: string): Promise<Date | undefined> {
  const entries = await readManifest(aofDir);
  if (!entries) return undefined;
  const base = entries.find((e) => e.type === 'b');
  if (base) {
    const handle = await openNoFollow(path.join(aofDir, base.file));
    try {
      return (await handle.stat()).mtime;
    } finally {
      await handle.close();
    }
  }
  const first = entries.find((e) => e.type === 'i');
  const ts = first ? await firstTimestamp(path.join(aofDir, first.file)) : undefined;
  return ts === undefined ? undefined : new Date(ts * 1000);
}

/**
 * Turns an RDB snapshot into the base of a fresh AOF (what a rewrite would have made),
 * so a persistent server loads it and appends its history after it.
 */
export async function rdbToAofBase(rdb: string, aofDir: string): Promise<void> {
  await rm(aofDir, { recursive: true, force: true });
  await mkdir(aofDir, { mode: 0o700 });
  const base = `${AOF_BASENAME}.1.base.rdb`;
  await rename(rdb, path.join(aofDir, base));
  await writeAtomic(manifestOf(aofDir), renderManifest([{ file: base, seq: 1, type: 'b' }]), 0o600);
}

/** fsyncs the incremental files of the AOF in `aofDir`, and the directory. */
export async function fsyncAof(aofDir: string): Promise<void> {
  const entries = (await readManifest(aofDir)) ?? [];
  for (const e of entries.filter((x) => x.type === 'i')) {
    await fsyncPath(path.join(aofDir, e.file)).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'ENOENT') throw err; // a rewrite removed it: its data is in the base
    });
  }
  await fsyncPath(aofDir);
}
