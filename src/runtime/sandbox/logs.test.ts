/**
 * The console log without any sandbox: the keeper's writer fed by hand, read back
 * through readLogs, with a fixed clock.
 */
import { appendFile, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { LogWriter, PARTIAL_FLUSH_MS } from './log-writer.js';
import { decodeSegment, LOG_SEGMENTS, readLogs } from './logs.js';

let dir: string;
let tick = 0;
const clock = () => new Date(Date.UTC(2025, 0, 1, 0, 0, 0, tick++));
const segmentSizes = async () =>
  Promise.all(
    LOG_SEGMENTS.map((f) =>
      stat(path.join(dir, f)).then(
        (s) => s.size,
        () => 0,
      ),
    ),
  );

beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'pier-logs-'));
  tick = 0;
});
afterEach(() => rm(dir, { recursive: true, force: true }));

describe('console log', () => {
  it('writes one numbered, timestamped record per line and per stream', async () => {
    const log = LogWriter.open(dir, 1 << 20, clock);
    log.append('stdout', Buffer.from('hello\nwor'));
    log.append('stderr', Buffer.from('oops\n'));
    log.append('stdout', Buffer.from('ld\n\n'));
    log.close();
    const page = await readLogs(dir);
    expect(page.entries).toEqual([
      { seq: 1, at: '2025-01-01T00:00:00.000Z', stream: 'stdout', text: 'hello' },
      { seq: 2, at: '2025-01-01T00:00:00.001Z', stream: 'stderr', text: 'oops' },
      { seq: 3, at: '2025-01-01T00:00:00.002Z', stream: 'stdout', text: 'world' },
      { seq: 4, at: '2025-01-01T00:00:00.002Z', stream: 'stdout', text: '' },
    ]);
    expect(page).toMatchObject({ cursor: 4, truncated: false });
    // The documented format, byte for byte.
    const text = await readFile(path.join(dir, 'log.0.jsonl'), 'utf8');
    expect(text.split('\n')[0]).toBe(
      '{"seq":1,"at":"2025-01-01T00:00:00.000Z","stream":"stdout","text":"hello"}',
    );
  });

  it('follows with a cursor and a limit', async () => {
    const log = LogWriter.open(dir, 1 << 20, clock);
    for (let i = 1; i <= 10; i++) log.append('stdout', Buffer.from(`line ${i}\n`));
    let page = await readLogs(dir, { limit: 4 });
    expect(page.entries.map((e) => e.text)).toEqual(['line 1', 'line 2', 'line 3', 'line 4']);
    page = await readLogs(dir, { after: page.cursor, limit: 100 });
    expect(page.entries.map((e) => e.seq)).toEqual([5, 6, 7, 8, 9, 10]);
    const idle = await readLogs(dir, { after: page.cursor });
    expect(idle).toEqual({ entries: [], cursor: 10, truncated: false });
    log.append('stderr', Buffer.from('late\n'));
    expect((await readLogs(dir, { after: 10 })).entries.map((e) => e.text)).toEqual(['late']);
    expect((await readLogs(dir, { tail: 2 })).entries.map((e) => e.seq)).toEqual([10, 11]);
    log.close();
  });

  it('stays within the cap under lots of output, keeping the newest records', async () => {
    const cap = 64 * 1024;
    const log = LogWriter.open(dir, cap, clock);
    for (let i = 1; i <= 20_000; i++)
      log.append(i % 3 ? 'stdout' : 'stderr', Buffer.from(`record number ${i}\n`));
    log.close();
    const [a = 0, b = 0] = await segmentSizes();
    expect(a).toBeLessThanOrEqual(cap / 2);
    expect(b).toBeLessThanOrEqual(cap / 2);
    expect(a + b).toBeGreaterThan(cap / 2); // both halves in use
    const page = await readLogs(dir, { limit: 100_000 });
    const seqs = page.entries.map((e) => e.seq);
    expect(seqs.at(-1)).toBe(20_000);
    expect(seqs).toEqual(seqs.map((_, i) => (seqs[0] as number) + i)); // contiguous
    expect(page.truncated).toBe(true); // the oldest were rotated away
    expect(page.entries.at(-1)?.text).toBe('record number 20000');
    // A follower whose cursor fell behind the rotation learns of the gap.
    const behind = await readLogs(dir, { after: 5, limit: 1 });
    expect(behind.truncated).toBe(true);
    expect(behind.entries[0]?.seq).toBe(seqs[0]);
  });

  it('cuts long lines into records that fit, and holds UTF-8 split across chunks', async () => {
    const log = LogWriter.open(dir, 8192, clock);
    log.append('stdout', Buffer.from('x'.repeat(5000) + '\n'));
    const euro = Buffer.from('€\n');
    log.append('stdout', euro.subarray(0, 1));
    log.append('stdout', euro.subarray(1));
    log.close();
    const { entries } = await readLogs(dir);
    const xs = entries.filter((e) => e.text.startsWith('x'));
    expect(xs.length).toBeGreaterThan(1);
    expect(xs.map((e) => e.text).join('')).toBe('x'.repeat(5000));
    expect(entries.at(-1)?.text).toBe('€');
    const [a = 0, b = 0] = await segmentSizes();
    expect(a + b).toBeLessThanOrEqual(8192);
  });

  it('writes a partial line after a quiet moment, and the rest at close', async () => {
    const log = LogWriter.open(dir, 1 << 20, clock);
    log.append('stdout', Buffer.from('password: '));
    expect((await readLogs(dir)).entries).toEqual([]);
    await new Promise((r) => setTimeout(r, PARTIAL_FLUSH_MS + 50));
    expect((await readLogs(dir)).entries.map((e) => e.text)).toEqual(['password: ']);
    log.append('stderr', Buffer.from('no newline at the end'));
    log.close();
    expect((await readLogs(dir)).entries.map((e) => e.text)).toEqual([
      'password: ',
      'no newline at the end',
    ]);
  });

  it('continues the numbering of an existing log and ends a torn last line', async () => {
    let log = LogWriter.open(dir, 1 << 20, clock);
    log.append('stdout', Buffer.from('one\ntwo\n'));
    log.close();
    // A keeper killed mid-write leaves half a record.
    await appendFile(path.join(dir, 'log.0.jsonl'), '{"seq":3,"at":"2025-');
    expect((await readLogs(dir)).entries.map((e) => e.seq)).toEqual([1, 2]);
    log = LogWriter.open(dir, 1 << 20, clock);
    log.append('stdout', Buffer.from('three\n'));
    log.close();
    const { entries } = await readLogs(dir);
    expect(entries.map((e) => [e.seq, e.text])).toEqual([
      [1, 'one'],
      [2, 'two'],
      [3, 'three'],
    ]);
  });

  it('continues in the newer segment after rotation', async () => {
    let log = LogWriter.open(dir, 4096, clock);
    for (let i = 0; i < 100; i++) log.append('stdout', Buffer.from(`${i}\n`));
    log.close();
    const before = await readLogs(dir, { tail: 1 });
    log = LogWriter.open(dir, 4096, clock);
    log.append('stdout', Buffer.from('after restart\n'));
    log.close();
    const last = await readLogs(dir, { after: before.cursor });
    expect(last.entries.map((e) => [e.seq, e.text])).toEqual([
      [before.cursor + 1, 'after restart'],
    ]);
  });

  it('starts over from the oldest when the cursor is beyond the end (a new log)', async () => {
    await writeFile(path.join(dir, 'log.0.jsonl'), '');
    const log = LogWriter.open(dir, 1 << 20, clock);
    log.append('stdout', Buffer.from('fresh\n'));
    log.close();
    const page = await readLogs(dir, { after: 500 });
    expect(page).toMatchObject({ cursor: 1, truncated: true });
    expect(decodeSegment('{"seq":1}\nnot json\n')).toEqual([]);
  });

  it('refuses a cap too small to hold records', () => {
    expect(() => LogWriter.open(dir, 1000)).toThrow(/logMaxBytes/);
  });
});
