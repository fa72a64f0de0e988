/**
 * `pier machines logs`: an app's console output. Without a cursor the API answers the
 * last lines of each machine; `-f` then passes the answered cursor back every second,
 * so following goes on exactly where the last page ended, until Ctrl-C.
 */
import type { Command } from 'commander';
import { type ApiClient, apiPath } from './api-client.js';
import { type CommonOptions, connect, withCommonOptions } from './connect.js';
import { note, wholeNumber } from './db-common.js';
import { action } from './errors.js';
import { sleep, transient } from './machines-common.js';
import type { AppLogs, LogEntry } from './machines-types.js';

interface LogsOptions extends CommonOptions {
  follow?: boolean;
  machine?: string;
  lines: number;
}

/** Between reads while following. */
const FOLLOW_MS = 1_000;
/** The most a page may hold (the route's bound): a full page is read again at once. */
const PAGE = 1_000;
/** How long following may see the API unreachable (a restarting server) before giving up. */
const OUTAGE_LIMIT_MS = 60_000;

/** Registers `pier machines logs`. */
export function registerMachineLogs(machines: Command): void {
  withCommonOptions(
    machines.command('logs').description("print an app's console output; -f keeps following it"),
  )
    .argument('<app>', 'app name')
    .option('-f, --follow', 'keep printing new lines until Ctrl-C')
    .option('--machine <id>', 'only this machine')
    .option('-n, --lines <n>', 'how many of the last lines to start with, 1-1000', wholeNumber, 100)
    .addHelpText(
      'after',
      '\nEach line is `TIME MACHINE STREAM TEXT`; --json prints one JSON object per line.',
    )
    .action(
      action(async (app: string, opts: LogsOptions) => {
        const client = await connect(opts);
        let page = await read(client, app, opts, undefined, opts.lines);
        print(page, opts);
        if (!opts.follow) return;
        let unreachableSince: number | undefined;
        for (;;) {
          if (page.entries.length < PAGE) await sleep(FOLLOW_MS);
          try {
            page = await read(client, app, opts, page.cursor, PAGE);
            unreachableSince = undefined;
          } catch (err) {
            // A restarting API comes back with the same cursor: wait through it.
            unreachableSince ??= performance.now();
            if (!transient(err) || performance.now() - unreachableSince > OUTAGE_LIMIT_MS) {
              throw err;
            }
            page = { ...page, entries: [] };
            continue;
          }
          print(page, opts);
        }
      }),
    );
}

function read(
  client: ApiClient,
  app: string,
  opts: LogsOptions,
  cursor: string | undefined,
  limit: number,
): Promise<AppLogs> {
  const q = new URLSearchParams({ limit: String(limit) });
  if (cursor) q.set('cursor', cursor);
  if (opts.machine) q.set('machine', opts.machine);
  return client.call<AppLogs>('GET', `${apiPath`/v1/apps/${app}/logs`}?${q}`);
}

function print(page: AppLogs, opts: LogsOptions): void {
  const out = page.entries.map((e) => (opts.json ? JSON.stringify(e) : line(e)));
  if (out.length > 0) process.stdout.write(`${out.join('\n')}\n`);
  for (const id of page.truncated) {
    note(`(older lines of ${id} were rotated away before they could be read)`);
  }
}

function line(e: LogEntry): string {
  return `${e.at} ${e.machineId} ${e.stream} ${e.text}`;
}
