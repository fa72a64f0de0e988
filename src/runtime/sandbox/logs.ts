/**
 * A machine's console log: what its processes write to stdout and stderr, kept by the
 * sandbox's keeper process (see keeper.ts) while pier is up or down, within a byte cap.
 *
 * Format. Two files in the sandbox's state directory, `log.0.jsonl` and `log.1.jsonl`,
 * hold one record per line, JSON, keys in this order:
 *
 *     {"seq":17,"at":"2025-06-01T12:00:00.123Z","stream":"stdout","text":"listening on :80"}
 *
 * - `seq` numbers records 1, 2, 3… for the life of the state directory (a restarted
 *   machine continues the count), so it is the cursor: "give me what follows 17".
 * - `at` is when the keeper read the bytes (ms precision), not when they were written;
 *   stdout and stderr are separate pipes, so their relative order is only as good as that.
 * - `text` is one line without its `\n`. A line is cut into several records past 16 KiB,
 *   and a partial line (no `\n` yet) becomes a record after 100 ms of quiet. Invalid
 *   UTF-8 shows as U+FFFD.
 *
 * The keeper appends to one file until the next record would take it past
 * `logMaxBytes / 2`, then empties the other file and continues there: the two files
 * together never exceed `logMaxBytes`, and what remains is always the newest half to
 * whole of the output. A reader needs no lock: records are appended whole with one
 * write, an unfinished last line is ignored, and whichever file starts with the higher
 * `seq` is the newer.
 */
import { open, readFile } from 'node:fs/promises';
import path from 'node:path';

/** Which pipe a record came from. */
export type LogStream = 'stdout' | 'stderr';

/** One record of a machine's console output. */
export interface LogEntry {
  /** Position in the log, 1-based; pass the last one seen as `after` to continue. */
  seq: number;
  /** ISO 8601 time the keeper read it. */
  at: string;
  stream: LogStream;
  /** One line (or a piece of a long one) without the newline. */
  text: string;
}

/** A cursor into a log: the `seq` of the last entry seen (0 before the first). */
export type LogCursor = number;

/** The answer of `readLogs`. */
export interface LogPage {
  entries: LogEntry[];
  /** Pass as `after` to get what follows; unchanged when nothing new was there. */
  cursor: LogCursor;
  /**
   * True when entries between `after` and the first entry returned are gone (the cap
   * rotated them away before they were read), so a follower can show a gap.
   */
  truncated: boolean;
}

/** The two segment files, in the state directory. */
export const LOG_SEGMENTS = ['log.0.jsonl', 'log.1.jsonl'] as const;

/** Smallest cap accepted: room for a few records per segment. */
export const MIN_LOG_BYTES = 4096;

/** The line for `entry`, newline included. */
export function encodeEntry(entry: LogEntry): string {
  const { seq, at, stream, text } = entry;
  return `${JSON.stringify({ seq, at, stream, text })}\n`;
}

/** Parses one line; undefined for a torn or foreign line. */
export function decodeEntry(line: string): LogEntry | undefined {
  try {
    const e = JSON.parse(line) as Partial<LogEntry>;
    if (typeof e.seq !== 'number' || typeof e.at !== 'string' || typeof e.text !== 'string') {
      return undefined;
    }
    if (e.stream !== 'stdout' && e.stream !== 'stderr') return undefined;
    return { seq: e.seq, at: e.at, stream: e.stream, text: e.text };
  } catch {
    return undefined;
  }
}

/** The complete records of `text` (a segment's content); a final unterminated line is skipped. */
export function decodeSegment(text: string): LogEntry[] {
  const lines = text.split('\n');
  lines.pop(); // '' after the last newline, or a record still being written
  const out: LogEntry[] = [];
  for (const line of lines) {
    const e = decodeEntry(line);
    if (e) out.push(e);
  }
  return out;
}

/** The `seq` of a segment's first record (read from its first bytes), or undefined. */
async function firstSeq(file: string): Promise<number | undefined> {
  const handle = await open(file, 'r').catch(() => undefined);
  if (!handle) return undefined;
  try {
    const buf = Buffer.alloc(64);
    const { bytesRead } = await handle.read(buf, 0, buf.length, 0);
    const m = /^\{"seq":(\d+),/.exec(buf.subarray(0, bytesRead).toString('utf8'));
    return m ? Number(m[1]) : undefined;
  } finally {
    await handle.close();
  }
}

async function readSegment(file: string): Promise<LogEntry[]> {
  return decodeSegment(await readFile(file, 'utf8').catch(() => ''));
}

/** Options of `readLogs`. */
export interface ReadLogsOptions {
  /** Return entries after this cursor (default 0: from the oldest kept). */
  after?: LogCursor;
  /** Instead of `after`: the last `tail` entries. */
  tail?: number;
  /** At most this many entries (default 1000). */
  limit?: number;
}

/**
 * Reads a sandbox's log from its state directory: the entries after `after` (oldest
 * first, at most `limit`), or the last `tail` ones. Reads only the newer segment when
 * the cursor lies within it, which is the common case of a follower. A cursor beyond the
 * end (the state directory was made anew) starts again from the oldest entry kept.
 */
export async function readLogs(stateDir: string, opts: ReadLogsOptions = {}): Promise<LogPage> {
  const limit = Math.max(1, Math.min(opts.limit ?? 1000, 100_000));
  const files = LOG_SEGMENTS.map((f) => path.join(stateDir, f));
  const heads = await Promise.all(files.map(firstSeq));
  // Older segment first; an empty one counts as oldest.
  const order = [0, 1].sort((a, b) => (heads[a] ?? -1) - (heads[b] ?? -1));
  const [olderFile, newerFile] = order.map((i) => files[i] as string) as [string, string];
  const newerHead = heads[order[1] as number];
  let after = opts.tail !== undefined ? 0 : Math.max(0, opts.after ?? 0);
  const load = async (newerOnly: boolean) => {
    const segs = newerOnly ? [newerFile] : [olderFile, newerFile];
    const entries = (await Promise.all(segs.map(readSegment))).flat();
    return entries.sort((a, b) => a.seq - b.seq);
  };
  const newerOnly = opts.tail === undefined && newerHead !== undefined && newerHead <= after + 1;
  let all = await load(newerOnly);
  let reset = false;
  if (after > (all.at(-1)?.seq ?? 0)) {
    after = 0;
    reset = true;
    if (newerOnly) all = await load(false);
  }
  if (opts.tail !== undefined) all = all.slice(-Math.max(0, opts.tail));
  const entries = all.filter((e) => e.seq > after).slice(0, limit);
  const first = entries[0];
  return {
    entries,
    cursor: entries.at(-1)?.seq ?? after,
    truncated: reset || (opts.tail === undefined && first !== undefined && first.seq > after + 1),
  };
}
