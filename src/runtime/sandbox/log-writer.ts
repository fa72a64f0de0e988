/**
 * The writing half of the console log (format in logs.ts), used by the keeper: bytes
 * from the machine's stdout and stderr become line records, appended to the current
 * segment and rotated at half the cap. Synchronous on purpose: the keeper has nothing
 * else to do, and a record is then on disk (in the page cache) before the next read.
 */
import { closeSync, fstatSync, openSync, readFileSync, writeSync } from 'node:fs';
import path from 'node:path';
import { StringDecoder } from 'node:string_decoder';
import {
  decodeSegment,
  encodeEntry,
  LOG_SEGMENTS,
  MIN_LOG_BYTES,
  type LogEntry,
  type LogStream,
} from './logs.js';

/** A partial line is written as a record after this long without more output. */
export const PARTIAL_FLUSH_MS = 100;
/** Longest text of one record, in UTF-16 code units. */
const MAX_TEXT = 16 * 1024;
/** Bytes of a record besides its text: the JSON frame, seq, time and stream. */
const FRAME_BYTES = 100;

interface StreamState {
  decoder: StringDecoder;
  pending: string;
  timer?: NodeJS.Timeout;
}

/** Appends a machine's output to its two-segment log. */
export class LogWriter {
  private fd: number;
  private size: number;
  private readonly streams = new Map<LogStream, StreamState>();
  /** Longest text per record: small caps shrink it so one record always fits a segment. */
  private readonly maxText: number;

  private constructor(
    private readonly dir: string,
    private readonly segmentBytes: number,
    private current: number,
    private seq: number,
    private readonly now: () => Date,
  ) {
    this.fd = this.openSegment(current, false);
    this.size = fstatSync(this.fd).size;
    // A JSON-escaped code unit takes at most 6 bytes (\u001b).
    this.maxText = Math.min(MAX_TEXT, Math.floor((segmentBytes - FRAME_BYTES) / 6));
    if (this.size > 0 && !readFileSync(this.segmentPath(current)).subarray(-1).equals(NL)) {
      this.writeRaw('\n'); // a keeper died mid-record: end that torn line
    }
  }

  /**
   * Opens the log in `dir` with a cap of `maxBytes` for both files together. Continues
   * an existing log: the numbering goes on from its last record, in its newer file.
   */
  static open(dir: string, maxBytes: number, now: () => Date = () => new Date()): LogWriter {
    if (!Number.isSafeInteger(maxBytes) || maxBytes < MIN_LOG_BYTES) {
      throw new Error(`logMaxBytes must be an integer ≥ ${MIN_LOG_BYTES}: ${maxBytes}`);
    }
    let current = 0;
    let seq = 0;
    LOG_SEGMENTS.forEach((file, i) => {
      let text = '';
      try {
        text = readFileSync(path.join(dir, file), 'utf8');
      } catch {
        return; // not there yet
      }
      const last = decodeSegment(text).at(-1)?.seq ?? 0;
      if (last > seq) [seq, current] = [last, i];
    });
    return new LogWriter(dir, Math.floor(maxBytes / 2), current, seq, now);
  }

  /** The last `seq` written. */
  get lastSeq(): number {
    return this.seq;
  }

  /** Takes a chunk the machine wrote to `stream`: whole lines become records at once. */
  append(stream: LogStream, chunk: Buffer): void {
    const state = this.state(stream);
    const text = state.pending + state.decoder.write(chunk);
    const lines = text.split('\n');
    state.pending = lines.pop() ?? '';
    const at = this.now().toISOString();
    const out: string[] = [];
    for (const line of lines) this.records(stream, line, at, out);
    // A line longer than a record is cut now rather than held without end.
    while (state.pending.length > this.maxText) {
      const piece = cut(state.pending, this.maxText);
      this.records(stream, piece, at, out);
      state.pending = state.pending.slice(piece.length);
    }
    this.writeRecords(out);
    clearTimeout(state.timer);
    state.timer = undefined;
    if (state.pending) {
      state.timer = setTimeout(() => this.flush(stream), PARTIAL_FLUSH_MS);
      state.timer.unref();
    }
  }

  /** Writes what is held of a partial line on `stream` as a record (at EOF, or after quiet). */
  flush(stream: LogStream): void {
    const state = this.state(stream);
    clearTimeout(state.timer);
    state.timer = undefined;
    const text = state.pending + state.decoder.end();
    state.decoder = new StringDecoder('utf8');
    state.pending = '';
    if (text === '') return;
    const out: string[] = [];
    this.records(stream, text, this.now().toISOString(), out);
    this.writeRecords(out);
  }

  /** Flushes both streams and closes the file. */
  close(): void {
    this.flush('stdout');
    this.flush('stderr');
    closeSync(this.fd);
  }

  private state(stream: LogStream): StreamState {
    let state = this.streams.get(stream);
    if (!state) {
      state = { decoder: new StringDecoder('utf8'), pending: '' };
      this.streams.set(stream, state);
    }
    return state;
  }

  /** Encodes `text` as one record, or several when it is longer than a record holds. */
  private records(stream: LogStream, text: string, at: string, out: string[]): void {
    let rest = text;
    do {
      const piece = cut(rest, this.maxText);
      rest = rest.slice(piece.length);
      const entry: LogEntry = { seq: ++this.seq, at, stream, text: piece };
      out.push(encodeEntry(entry));
    } while (rest.length > 0);
  }

  /** Appends records, rotating to the other segment whenever the next would not fit. */
  private writeRecords(records: string[]): void {
    let batch = '';
    let batchBytes = 0;
    for (const record of records) {
      const bytes = Buffer.byteLength(record);
      if (this.size + batchBytes + bytes > this.segmentBytes) {
        this.writeRaw(batch);
        [batch, batchBytes] = ['', 0];
        this.rotate();
      }
      batch += record;
      batchBytes += bytes;
    }
    this.writeRaw(batch);
  }

  private writeRaw(text: string): void {
    if (text === '') return;
    const buf = Buffer.from(text);
    for (let off = 0; off < buf.length;) off += writeSync(this.fd, buf, off);
    this.size += buf.length;
  }

  private rotate(): void {
    closeSync(this.fd);
    this.current = 1 - this.current;
    this.fd = this.openSegment(this.current, true);
    this.size = 0;
  }

  private segmentPath(i: number): string {
    return path.join(this.dir, LOG_SEGMENTS[i] as string);
  }

  private openSegment(i: number, truncate: boolean): number {
    return openSync(this.segmentPath(i), truncate ? 'w' : 'a', 0o640);
  }
}

const NL = Buffer.from('\n');

/** The first `max` code units of `text`, not splitting a surrogate pair. */
function cut(text: string, max: number): string {
  if (text.length <= max) return text;
  const code = text.charCodeAt(max - 1);
  return text.slice(0, code >= 0xd800 && code <= 0xdbff ? max - 1 : max);
}
