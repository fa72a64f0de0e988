/**
 * `pier secrets list|set|unset`: an app's encrypted secrets (spec 2.8, 4.10). Values go
 * in and never come back out; `NAME=-` reads a value from stdin so it stays out of shell
 * history and process listings.
 */
import type { Command } from 'commander';
import { apiPath } from './api-client.js';
import { type CommonOptions, collect, connect, withCommonOptions } from './connect.js';
import { CliError, action } from './errors.js';
import { chompNewline, readStdin } from './input.js';
import { printJson, printTable, say, when } from './output.js';
import type { PutSecretsAnswer, Secret } from './types.js';

interface SetOptions extends CommonOptions {
  unstaged?: boolean;
  build?: string[];
}

/** Registers `pier secrets`. */
export function registerSecrets(program: Command): void {
  const secrets = program
    .command('secrets')
    .description("an app's secrets (values are never shown)");

  withCommonOptions(secrets.command('list').description('list secret names and metadata'))
    .argument('<app>', 'app name')
    .action(
      action(async (app: string, opts: CommonOptions) => {
        const list = await (
          await connect(opts)
        ).call<Secret[]>('GET', apiPath`/v1/apps/${app}/secrets`);
        if (opts.json) return printJson(list);
        printTable(
          ['NAME', 'BUILD', 'MANAGED', 'UPDATED'],
          list.map((s) => [
            s.name,
            s.build ? 'yes' : '-',
            s.managed ? (s.managedReason ?? 'yes') : '-',
            when(s.updatedAt),
          ]),
          `No secrets on ${app}.`,
        );
      }),
    );

  withCommonOptions(
    secrets.command('set').description('set secrets (NAME=VALUE; NAME=- reads stdin)'),
  )
    .argument('<app>', 'app name')
    .argument(
      '[pairs...]',
      'NAME=VALUE pairs; NAME=- takes the value from stdin (one final newline dropped)',
    )
    .option(
      '--unstaged',
      'apply now: restart machines that lack a new value (default: next deploy)',
    )
    .option('--build <name>', 'let the next source build see this secret; repeatable', collect)
    .action(
      action(async (app: string, pairs: string[], opts: SetOptions) => {
        const values = await parsePairs(pairs);
        const build = opts.build ?? [];
        if (Object.keys(values).length === 0 && build.length === 0) {
          throw new CliError('give at least one NAME=VALUE (or --build NAME)');
        }
        const body: Record<string, unknown> = { staged: !opts.unstaged };
        if (Object.keys(values).length > 0) body.secrets = values;
        if (build.length > 0) body.build = Object.fromEntries(build.map((n) => [n, true]));
        const client = await connect(opts);
        const answer = await client.call<PutSecretsAnswer>(
          'PUT',
          apiPath`/v1/apps/${app}/secrets`,
          body,
        );
        if (opts.json) return printJson(answer);
        const names = answer.changed.join(', ') || 'nothing';
        if (answer.staged) {
          say(`Staged ${names} on ${answer.appName}; machines get the values at the next deploy.`);
        } else if (answer.restarted.length > 0) {
          say(`Set ${names} on ${answer.appName}; restarted ${answer.restarted.join(', ')}.`);
        } else {
          say(`Set ${names} on ${answer.appName}; no machine needed a restart.`);
        }
      }),
    );

  withCommonOptions(secrets.command('unset').description('remove a secret'), { json: false })
    .argument('<app>', 'app name')
    .argument('<name>', 'secret name')
    .action(
      action(async (app: string, name: string, opts: CommonOptions) => {
        await (await connect(opts)).call('DELETE', apiPath`/v1/apps/${app}/secrets/${name}`);
        say(`Removed ${name} from ${app}.`);
      }),
    );
}

/** NAME=VALUE arguments into an object; at most one value can come from stdin. */
async function parsePairs(pairs: string[]): Promise<Record<string, string>> {
  const values: Record<string, string> = {};
  let fromStdin: string | undefined;
  for (const pair of pairs) {
    const eq = pair.indexOf('=');
    // Only the name goes into messages: the rest may be a secret value.
    const name = eq === -1 ? pair : pair.slice(0, eq);
    if (eq <= 0) throw new CliError(`'${name}' is not NAME=VALUE`);
    if (name in values || name === fromStdin) throw new CliError(`${name} is given twice`);
    const value = pair.slice(eq + 1);
    if (value === '-') {
      if (fromStdin !== undefined) {
        throw new CliError(`only one value can come from stdin (${fromStdin} and ${name} ask)`);
      }
      fromStdin = name;
    } else {
      values[name] = value;
    }
  }
  if (fromStdin !== undefined)
    values[fromStdin] = chompNewline(await readStdin(`the value of ${fromStdin}`));
  return values;
}
