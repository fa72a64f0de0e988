/**
 * `pier db branch|fork|restore` (spec 4.3): the API answers 202 at once and does the
 * work in the background, so each command then waits for the database to settle, with a
 * progress line on stderr, unless `--no-wait`. A copy's URL is not in any of these
 * answers: it is handed out once by `pier db url`, which the commands point to.
 */
import { type Command, Option } from 'commander';
import type { ApiClient } from './api-client.js';
import { apiPath } from './api-client.js';
import { type CommonOptions, connect, withCommonOptions } from './connect.js';
import { moment, note, wholeNumber } from './db-common.js';
import type { Database, RestoringDatabase } from './db-types.js';
import { waitUntilSettled } from './db-wait.js';
import { CliError, action } from './errors.js';
import { printJson, say } from './output.js';

interface WaitOptions extends CommonOptions {
  /** commander's `--no-wait`: false when given. */
  wait: boolean;
}

interface CopyOptions extends WaitOptions {
  ttl?: number;
  expiresAt?: string;
}

interface BranchOptions extends CopyOptions {
  ephemeral?: boolean;
}

interface ForkOptions extends CopyOptions {
  asOf?: string;
}

interface RestoreOptions extends WaitOptions {
  asOf: string;
  preserveUnder?: string;
}

/** Registers `pier db branch`, `fork` and `restore`. */
export function registerDbCopies(db: Command): void {
  withCopyOptions(
    db.command('branch').description('copy a database as it is now (copy-on-write, quick)'),
  )
    .argument('<source>', 'database to branch')
    .argument('<name>', 'name of the new branch')
    .option('--ephemeral', 'no archive of its own: quicker, but lost if its host fails')
    .action(
      action(async (source: string, name: string, opts: BranchOptions) => {
        const body = { name, ...expiry(opts), ...(opts.ephemeral ? { ephemeral: true } : {}) };
        await copy('branch', source, name, body, opts);
      }),
    );

  withCopyOptions(
    db.command('fork').description('copy a database from its archive, as of a moment'),
  )
    .argument('<source>', 'database to fork')
    .argument('<name>', 'name of the new fork')
    .option('--as-of <time>', 'the moment to copy, ISO 8601 (default: now)', moment)
    .action(
      action(async (source: string, name: string, opts: ForkOptions) => {
        const body = { name, ...expiry(opts), ...(opts.asOf ? { asOf: opts.asOf } : {}) };
        await copy('fork', source, name, body, opts);
      }),
    );

  withWaitOptions(
    db
      .command('restore')
      .description('take a database back to a moment; its state before is kept as a branch'),
  )
    .argument('<name>', 'database to restore; its URL, port and password stay the same')
    .requiredOption('--as-of <time>', 'the moment to go back to, ISO 8601', moment)
    .option('--preserve-under <name>', 'name of the branch keeping the state before the restore')
    .action(
      action(async (name: string, opts: RestoreOptions) => {
        const client = await connect(opts);
        const body = {
          asOf: opts.asOf,
          ...(opts.preserveUnder ? { preserveUnderName: opts.preserveUnder } : {}),
        };
        const started = await client.call<RestoringDatabase>(
          'POST',
          apiPath`/v1/resources/${name}/restore`,
          body,
        );
        const kept = started.preservedUnderName;
        if (!opts.wait) {
          if (opts.json) return printJson(started);
          return say(
            `Restoring ${name} to ${opts.asOf}; its state before is kept as ${kept}.`,
            `\`pier db show ${name}\` tells when it is done.`,
          );
        }
        note(`Restoring ${name} to ${opts.asOf}; its state before is kept as ${kept}.`);
        const done = await waitUntilSettled(client, name);
        // A failed restore leaves the database ready on its old data, with the reason.
        if (done.state === 'failed' || done.stateReason) {
          throw new CliError(done.stateReason ?? `the restore of ${name} failed`);
        }
        if (opts.json) return printJson({ ...done, preservedUnderName: kept });
        say(
          `Restored ${name} to ${opts.asOf}; its URL is unchanged.`,
          `The state before is the branch ${kept}; \`pier db url ${kept}\` gives its URL.`,
        );
      }),
    );
}

/** Asks for a branch or fork, then waits for it (unless --no-wait) and says what is next. */
async function copy(
  what: 'branch' | 'fork',
  source: string,
  name: string,
  body: Record<string, unknown>,
  opts: CopyOptions,
): Promise<void> {
  const client: ApiClient = await connect(opts);
  const path =
    what === 'branch'
      ? apiPath`/v1/resources/${source}/branch`
      : apiPath`/v1/resources/${source}/fork`;
  const started = await client.call<Database>('POST', path, body);
  const title = `${what === 'branch' ? 'Branch' : 'Fork'} ${name} of ${source}`;
  if (!opts.wait) {
    if (opts.json) return printJson(started);
    return say(
      `${title} is being made (${started.state}).`,
      `\`pier db show ${name}\` tells when it is ready; then \`pier db url ${name}\` gives its URL, once.`,
    );
  }
  const done = await waitUntilSettled(client, name);
  if (done.state === 'failed') {
    throw new CliError(`${title} failed: ${done.stateReason ?? 'no reason given'}`);
  }
  if (opts.json) return printJson(done);
  say(
    `${title} is ready.`,
    `Its URL is shown once: \`pier db url ${name} --save\` keeps it for \`pier db connect\`.`,
  );
}

/** The expiry part of a copy body. */
function expiry(opts: CopyOptions): Record<string, unknown> {
  if (opts.ttl !== undefined) return { ttlSeconds: opts.ttl };
  if (opts.expiresAt !== undefined) return { expiresAt: opts.expiresAt };
  return {};
}

function withWaitOptions(cmd: Command): Command {
  return withCommonOptions(cmd).option(
    '--no-wait',
    'return once the work is accepted instead of waiting for it',
  );
}

function withCopyOptions(cmd: Command): Command {
  return withWaitOptions(cmd)
    .addOption(
      new Option('--ttl <seconds>', 'delete the copy after this many seconds (60-2592000)')
        .argParser(wholeNumber)
        .conflicts('expiresAt'),
    )
    .addOption(
      new Option('--expires-at <time>', 'delete the copy at this moment, ISO 8601').argParser(
        moment,
      ),
    );
}
