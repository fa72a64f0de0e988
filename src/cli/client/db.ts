/**
 * `pier db`: managed PostgreSQL and Redis databases (spec 4.3). Create, list, show and
 * delete live here; branch, fork and restore in db-copies.ts; url and connect in
 * db-connect.ts. A URL carries the password, so it is printed only where the API hands
 * it out (create, url) and never by list or show.
 */
import { createInterface } from 'node:readline/promises';
import { type Command, Option } from 'commander';
import { apiPath } from './api-client.js';
import { type CommonOptions, connect, withCommonOptions } from './connect.js';
import { note, wholeNumber } from './db-common.js';
import { registerDbConnect } from './db-connect.js';
import { registerDbCopies } from './db-copies.js';
import type { CreatedDatabase, Database } from './db-types.js';
import { forgetUrl, savedUrl, saveUrl } from './db-url-store.js';
import { CliError, action } from './errors.js';
import { printFields, printJson, printTable, say, when } from './output.js';

interface CreateOptions extends CommonOptions {
  kind: 'postgres' | 'redis';
  memory?: number;
  size?: number;
  locale?: string;
  redundant?: boolean;
  persistent?: boolean;
  flushInterval?: number;
  save?: boolean;
}

interface DeleteOptions extends CommonOptions {
  yes?: boolean;
}

/** Registers `pier db`. */
export function registerDb(program: Command): void {
  const db = program.command('db').description('managed PostgreSQL and Redis databases');

  withCommonOptions(db.command('create').description('create a database; prints its URL once'))
    .argument('<name>', '1-63 lowercase letters, digits and hyphens; unique on the platform')
    .addOption(
      new Option('--kind <kind>', 'the engine')
        .choices(['postgres', 'redis'])
        .makeOptionMandatory(),
    )
    .option('--memory <mb>', 'memory in MB, 128-16384 (default: 256)', wholeNumber)
    .option('--size <gb>', 'disk size in GB, 1-500 (default: 10)', wholeNumber)
    .option('--locale <locale>', 'postgres: ICU locale of the database, e.g. de-DE')
    .option('--redundant', 'postgres: keep a standby on a second host (host-redundant)')
    // --persistent first, so that with neither flag the server's default applies.
    .option('--persistent', 'redis: keep the data on a volume (postgres always does)')
    .option('--no-persistent', 'redis: memory only, lost on restart (the default for redis)')
    .option(
      '--flush-interval <seconds>',
      'redis with --persistent: seconds between saves',
      wholeNumber,
    )
    .option('--save', 'keep the URL in databases.json beside the CLI config, for `pier db connect`')
    .action(
      action(async (name: string, opts: CreateOptions) => {
        const client = await connect(opts);
        const created = await client.call<CreatedDatabase>(
          'POST',
          '/v1/resources',
          createBody(name, opts),
        );
        // The URL exists nowhere else: it goes out before anything that could still fail.
        if (opts.json) printJson(created);
        else {
          note(
            `Created ${created.kind} database ${created.name} on port ${created.port}. Its URL:`,
          );
          say(created.url);
        }
        if (opts.save) {
          const file = await saveUrl(client.baseUrl, created.name, created.url);
          note(`Saved the URL in ${file}; \`pier db connect ${created.name}\` uses it.`);
        } else if (!opts.json) {
          note('This is the only time the URL is shown; store it now.');
        }
      }),
    );

  withCommonOptions(db.command('list').description('list databases (never their URLs)')).action(
    action(async (opts: CommonOptions) => {
      const list = await (await connect(opts)).call<Database[]>('GET', '/v1/resources');
      if (opts.json) return printJson(list);
      printTable(
        ['NAME', 'KIND', 'STATE', 'POWER', 'PORT', 'COPY-OF', 'EXPIRES'],
        list.map((d) => [
          d.name,
          d.kind,
          d.state,
          d.power,
          String(d.port),
          d.sourceName ? `${d.sourceName} (${d.copyKind ?? 'copy'})` : '-',
          when(d.expiresAt),
        ]),
        'No databases.',
      );
    }),
  );

  withCommonOptions(db.command('show').description('show one database (never its URL)'))
    .argument('<name>', 'database name')
    .action(
      action(async (name: string, opts: CommonOptions) => {
        const client = await connect(opts);
        const d = await client.call<Database>('GET', apiPath`/v1/resources/${name}`);
        if (opts.json) return printJson(d);
        const saved = (await savedUrl(client.baseUrl, d.name).catch(() => undefined)) !== undefined;
        printFields(databaseFields(d, saved));
      }),
    );

  withCommonOptions(
    db.command('delete').description('delete a database: its servers, data and archive'),
    { json: false },
  )
    .argument('<name>', 'database name')
    .option('--yes', 'do not ask; needed when stdin is not a terminal')
    .action(
      action(async (name: string, opts: DeleteOptions) => {
        // Connect first: a missing key should not surface only after the person confirmed.
        const client = await connect(opts);
        if (!opts.yes) await confirmDelete(name);
        await client.call('DELETE', apiPath`/v1/resources/${name}`);
        say(`Deleted database ${name}.`);
        // A dead URL only misleads `pier db connect`; a broken store must not fail the delete.
        if (await forgetUrl(client.baseUrl, name).catch(() => false)) {
          note(`Removed its saved URL.`);
        }
      }),
    );

  registerDbCopies(db);
  registerDbConnect(db);
}

/** The create body from the flags; the server checks the values and combinations. */
function createBody(name: string, opts: CreateOptions): Record<string, unknown> {
  const body: Record<string, unknown> = { name, kind: opts.kind };
  if (opts.memory !== undefined) body.memoryMb = opts.memory;
  if (opts.size !== undefined) body.sizeGb = opts.size;
  if (opts.locale !== undefined) body.locale = opts.locale;
  if (opts.redundant) body.durability = 'host-redundant';
  if (opts.persistent !== undefined) body.persistent = opts.persistent;
  if (opts.flushInterval !== undefined) body.flushIntervalS = opts.flushInterval;
  return body;
}

/** The `show` block; undefined values are left out by printFields. */
function databaseFields(d: Database, savedUrl: boolean): [string, string | undefined][] {
  const policy = d.suspendPolicy;
  return [
    ['Name', d.name],
    ['Kind', d.kind],
    ['State', d.stateReason ? `${d.state} (${d.stateReason})` : d.state],
    ['Power', d.power],
    ['Port', String(d.port)],
    ['Host', d.host],
    ['Memory', `${d.memoryMb} MB`],
    ['Size', `${d.sizeGb} GB`],
    ['Persistent', d.persistent ? 'yes' : 'no'],
    ['Durability', d.durability],
    ['Locale', d.locale],
    [
      'Copy of',
      d.sourceName
        ? `${d.sourceName} (${d.copyKind ?? 'copy'}${d.sourceAsOf ? ` as of ${when(d.sourceAsOf)}` : ''})`
        : undefined,
    ],
    ['Ephemeral', d.ephemeral ? (d.ephemeralNote ?? 'yes') : undefined],
    ['Expires', d.expiresAt ? when(d.expiresAt) : undefined],
    [
      'Sleep',
      policy
        ? policy.mode === 'off'
          ? 'never'
          : `${policy.mode} after ${policy.idleSeconds}s idle` +
            (policy.stopAfterSeconds ? `, stop after ${policy.stopAfterSeconds}s` : '')
        : undefined,
    ],
    ['App secret', d.secretKey],
    ['Saved URL', savedUrl ? `yes (pier db connect ${d.name})` : 'no'],
    ['Created', when(d.createdAt)],
  ];
}

/**
 * Deleting destroys the data and its archive, with no undo: ask on a terminal, and
 * refuse outright elsewhere, since a script that forgot --yes should stop, not hang.
 */
async function confirmDelete(name: string): Promise<void> {
  if (!process.stdin.isTTY) {
    throw new CliError(`refusing to delete ${name} without --yes (no terminal to ask on)`);
  }
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  try {
    const answer = await rl.question(
      `Delete database ${name} with all its data and archive? Type its name to confirm: `,
    );
    if (answer.trim() !== name) throw new CliError(`not deleted: the name did not match`);
  } finally {
    rl.close();
  }
}
