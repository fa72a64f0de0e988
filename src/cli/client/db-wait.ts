/**
 * Waiting for a database to leave `restoring` (branch, fork, restore), with a progress
 * line on stderr so the person sees the work move. On a terminal the line is redrawn in
 * place; elsewhere (a CI log, a test) a line is written when the state changes and every
 * few seconds, so a long restore neither looks hung nor floods the log.
 */
import { type ApiClient, apiPath } from './api-client.js';
import type { Database } from './db-types.js';
import { ApiCallError, NetworkError } from './errors.js';

/** How often the record is read: quick enough to feel live, cheap for the server. */
const POLL_MS = 250;
/** Without a terminal, a line at most this often while nothing changes. */
const LOG_EVERY_MS = 5_000;
/** How long the API may stay unreachable (a restarting server) before giving up. */
const OUTAGE_LIMIT_MS = 60_000;

/** Where the progress goes; tests and callers may pass another stream. */
export interface WaitOptions {
  stream?: NodeJS.WriteStream;
  pollMs?: number;
}

/**
 * Polls `GET /v1/resources/:name` until its state is `ready` or `failed` and answers that
 * record. Failures are the caller's to judge: a failed copy says `failed`, a failed
 * restore says `ready` with a `stateReason`.
 */
export async function waitUntilSettled(
  client: ApiClient,
  name: string,
  opts: WaitOptions = {},
): Promise<Database> {
  const line = new ProgressLine(opts.stream ?? process.stderr);
  const started = performance.now();
  const elapsed = () => `${((performance.now() - started) / 1000).toFixed(1)}s`;
  line.note(`Waiting for ${name} (Ctrl-C stops waiting; the work goes on).`);
  let unreachableSince: number | undefined;
  for (;;) {
    let db: Database;
    try {
      db = await client.call<Database>('GET', apiPath`/v1/resources/${name}`);
      unreachableSince = undefined;
    } catch (err) {
      // A server restarting mid-restore resumes the work; keep waiting through it.
      if (!transient(err)) {
        line.end();
        throw err;
      }
      unreachableSince ??= performance.now();
      if (performance.now() - unreachableSince > OUTAGE_LIMIT_MS) {
        line.end();
        throw err;
      }
      await sleep(opts.pollMs ?? POLL_MS);
      continue;
    }
    if (db.state !== 'restoring') {
      line.done(`${name}: ${db.state} after ${elapsed()}`);
      return db;
    }
    line.show(`${name}: ${db.state}  ${elapsed()}`, db.state);
    await sleep(opts.pollMs ?? POLL_MS);
  }
}

/** One redrawn line on a terminal; throttled whole lines elsewhere. */
class ProgressLine {
  private readonly tty: boolean;
  private drawn = false;
  private lastState?: string;
  private lastLog = Number.NEGATIVE_INFINITY;

  constructor(private readonly stream: NodeJS.WriteStream) {
    this.tty = stream.isTTY === true;
  }

  /** A line of its own, before any progress. */
  note(text: string): void {
    this.stream.write(`${text}\n`);
  }

  show(text: string, state: string): void {
    if (this.tty) {
      // \x1b[K clears what a longer earlier line left to the right.
      this.stream.write(`\r${text}\x1b[K`);
      this.drawn = true;
      return;
    }
    const now = performance.now();
    if (state === this.lastState && now - this.lastLog < LOG_EVERY_MS) return;
    this.lastState = state;
    this.lastLog = now;
    this.stream.write(`${text}\n`);
  }

  done(text: string): void {
    if (this.tty) this.stream.write(`\r${text}\x1b[K\n`);
    else this.stream.write(`${text}\n`);
    this.drawn = false;
  }

  /** Ends a half-drawn terminal line so an error message starts on a line of its own. */
  end(): void {
    if (this.drawn) this.stream.write('\n');
    this.drawn = false;
  }
}

function transient(err: unknown): boolean {
  return err instanceof NetworkError || (err instanceof ApiCallError && err.status >= 502);
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
