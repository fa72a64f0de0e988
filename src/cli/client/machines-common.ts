/**
 * What the `pier machines` files share: the raw credentials (exec and cp talk to the API
 * outside the JSON client), a status line for long work, a yes/no question, and the
 * wording of a machine's state.
 */
import { createInterface } from 'node:readline/promises';
import { ApiClient } from './api-client.js';
import { resolveSettings } from './config-file.js';
import type { CommonOptions } from './connect.js';
import { ApiCallError, CliError, NetworkError } from './errors.js';
import type { Machine } from './machines-types.js';

/** A JSON client plus the address and key it uses, for requests it cannot make. */
export interface Credentials {
  client: ApiClient;
  apiUrl: string;
  apiKey: string;
}

/** Like `connect`, but also hands out the address and key (WebSocket, raw bodies). */
export async function credentials(opts: CommonOptions): Promise<Credentials> {
  const settings = await resolveSettings(opts);
  if (!settings.apiKey) {
    throw new CliError(`no API key for ${settings.apiUrl}; run \`pier login\` or set PIER_API_KEY`);
  }
  return {
    client: new ApiClient(settings.apiUrl, settings.apiKey),
    apiUrl: settings.apiUrl,
    apiKey: settings.apiKey,
  };
}

/** Without a terminal, a line at most this often while nothing changes. */
const LOG_EVERY_MS = 5_000;

/**
 * One line of progress on stderr. On a terminal it is redrawn in place; elsewhere (a CI
 * log, a test) a line is written when the state changes and every few seconds, so long
 * work neither looks hung nor floods the log.
 */
export class StatusLine {
  private readonly tty: boolean;
  private readonly started = performance.now();
  private drawn = false;
  private lastKey?: string;
  private lastLog = Number.NEGATIVE_INFINITY;

  constructor(private readonly stream: NodeJS.WriteStream = process.stderr) {
    this.tty = stream.isTTY === true;
  }

  /** Seconds since the line was made: "1.4s". */
  elapsed(): string {
    return `${((performance.now() - this.started) / 1000).toFixed(1)}s`;
  }

  /** A line of its own. */
  note(text: string): void {
    this.end();
    this.stream.write(`${text}\n`);
  }

  /** Shows `text`; `key` is what counts as a change worth a new line off a terminal. */
  show(text: string, key: string = text): void {
    if (this.tty) {
      // \x1b[K clears what a longer earlier line left to the right.
      this.stream.write(`\r${text}\x1b[K`);
      this.drawn = true;
      return;
    }
    const now = performance.now();
    if (key === this.lastKey && now - this.lastLog < LOG_EVERY_MS) return;
    this.lastKey = key;
    this.lastLog = now;
    this.stream.write(`${text}\n`);
  }

  /** Ends a half-drawn terminal line so what follows starts on a line of its own. */
  end(): void {
    if (this.drawn) this.stream.write('\r\x1b[K');
    this.drawn = false;
  }
}

/** What a state means while a machine is being made. */
export function createPhase(state: string): string {
  if (state === 'requested' || state === 'scheduled') return 'queued';
  if (state === 'starting') return 'pulling the image and booting';
  return state;
}

/** The state column: the observed state, and where it is headed when that differs. */
export function stateText(m: Machine): string {
  return m.desiredState === m.observedState || m.observedState === 'failed'
    ? m.observedState
    : `${m.observedState} (wants ${m.desiredState})`;
}

/** Errors worth waiting through: the API restarting, a proxy in between failing. */
export function transient(err: unknown): boolean {
  return err instanceof NetworkError || (err instanceof ApiCallError && err.status >= 502);
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * Asks a yes/no question on the terminal. Without one it refuses: a script that forgot
 * --yes should stop, not hang.
 */
export async function confirm(question: string, refusal: string): Promise<void> {
  if (!process.stdin.isTTY) throw new CliError(`${refusal} without --yes (no terminal to ask on)`);
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  try {
    const answer = (await rl.question(`${question} [y/N] `)).trim().toLowerCase();
    if (answer !== 'y' && answer !== 'yes') throw new CliError('cancelled; nothing was changed');
  } finally {
    rl.close();
  }
}
