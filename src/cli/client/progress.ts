/**
 * A transfer meter on stderr: bytes done / total, percent and MB/s. On a terminal it
 * redraws one line in place; elsewhere (a log, a test) it writes whole lines, so the
 * output never fills with carriage returns.
 */

/** How often the meter may redraw: often enough to look live, rarely enough to cost nothing. */
const REDRAW_MS = 100;

/** What a meter draws on and whether it draws at all. */
export interface ProgressOptions {
  /** Names the transfer at the start of the line ("upload photos:a.png"). */
  label: string;
  /** Bytes expected; undefined for a stream of unknown length (stdin, chunked answers). */
  total?: number;
  /** False makes every method a no-op, so callers need no conditionals. */
  enabled: boolean;
  stream?: NodeJS.WriteStream;
}

/** Counts bytes of one transfer and draws them at most every REDRAW_MS. */
export class Progress {
  private done = 0;
  private lastDraw = Number.NEGATIVE_INFINITY;
  private readonly started = performance.now();
  private readonly stream: NodeJS.WriteStream;
  private readonly tty: boolean;

  constructor(private readonly opts: ProgressOptions) {
    this.stream = opts.stream ?? process.stderr;
    this.tty = this.stream.isTTY === true;
  }

  /** Bytes moved so far. */
  get bytes(): number {
    return this.done;
  }

  /** Records `n` more bytes; redraws if the last drawing is old enough. */
  add(n: number): void {
    this.done += n;
    const now = performance.now();
    if (now - this.lastDraw < REDRAW_MS) return;
    this.lastDraw = now;
    this.draw(false);
  }

  /** Draws the final state and ends the line. */
  finish(): void {
    this.draw(true);
  }

  /** Ends a half-drawn terminal line so an error message starts on a line of its own. */
  abort(): void {
    if (this.opts.enabled && this.tty && this.lastDraw > Number.NEGATIVE_INFINITY) {
      this.stream.write('\n');
    }
  }

  private draw(final: boolean): void {
    if (!this.opts.enabled) return;
    const line = this.line();
    if (!this.tty) this.stream.write(`${line}\n`);
    // \x1b[K clears what a longer earlier line left to the right.
    else this.stream.write(`\r${line}\x1b[K${final ? '\n' : ''}`);
  }

  private line(): string {
    const seconds = Math.max((performance.now() - this.started) / 1000, 0.001);
    const rate = `${(this.done / 1e6 / seconds).toFixed(1)} MB/s`;
    const { label, total } = this.opts;
    if (total === undefined) return `${label}  ${formatBytes(this.done)}  ${rate}`;
    const percent = total === 0 ? 100 : Math.floor((this.done / total) * 100);
    return `${label}  ${formatBytes(this.done)} / ${formatBytes(total)}  ${percent}%  ${rate}`;
  }
}

/** Whether to show a meter: `--progress`/`--no-progress` if given, else only on a terminal. */
export function progressWanted(
  flag: boolean | undefined,
  stream: NodeJS.WriteStream = process.stderr,
): boolean {
  return flag ?? stream.isTTY === true;
}

/** Bytes in decimal units (the same MB as in MB/s): "512 B", "3.1 MB". */
export function formatBytes(n: number): string {
  if (n < 1000) return `${n} B`;
  const units = ['kB', 'MB', 'GB', 'TB', 'PB'];
  let value = n;
  let unit = '';
  for (const u of units) {
    value /= 1000;
    unit = u;
    // 999.96 kB would print as "1000.0 kB": move on to the next unit instead.
    if (value < 999.95) break;
  }
  return `${value.toFixed(1)} ${unit}`;
}
