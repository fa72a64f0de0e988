/** `pier builds [list] --app NAME` and `pier builds logs ID [--follow]` (CONTRACT 7). */
import type { Command } from 'commander';
import { apiPath } from './api-client.js';
import { type CommonOptions, connect, withCommonOptions } from './connect.js';
import { finishBuild, streamBuildLog } from './deploy-flow.js';
import { action } from './errors.js';
import { credentials } from './machines-common.js';
import { printJson, printTable, when } from './output.js';
import type { Build } from './types.js';

interface ListOptions extends CommonOptions {
  app: string;
}

interface LogsOptions extends CommonOptions {
  follow?: boolean;
}

/** Registers `pier builds`. */
export function registerBuilds(program: Command): void {
  const builds = program.command('builds').description("an app's image builds and their logs");

  withCommonOptions(
    builds.command('list', { isDefault: true }).description("list an app's builds, newest first"),
  )
    .requiredOption('-a, --app <name>', 'app name')
    .action(
      action(async (opts: ListOptions) => {
        const client = await connect(opts);
        const list = await client.call<Build[]>('GET', apiPath`/v1/apps/${opts.app}/builds`);
        if (opts.json) return printJson(list);
        printTable(
          ['ID', 'STATE', 'BUILDER', 'CREATED', 'FINISHED', 'IMAGE', 'ERROR'],
          list.map((b) => [
            b.id,
            b.state,
            b.builder ?? '-',
            when(b.createdAt),
            when(b.finishedAt),
            b.imageDigest ? b.imageDigest.slice(0, 19) : '-',
            b.error ?? '',
          ]),
          'No builds yet.',
        );
      }),
    );

  withCommonOptions(builds.command('logs').description("print a build's log"), { json: false })
    .argument('<id>', 'build id')
    .option('-f, --follow', 'keep printing until the build ends; a failed build exits 1')
    .action(
      action(async (id: string, opts: LogsOptions) => {
        const creds = await credentials(opts);
        // Following ends with the build: a failed one exits non-zero, like `pier deploy`.
        if (opts.follow) return void (await finishBuild(creds, id, process.stdout));
        await streamBuildLog(creds, id, false, process.stdout);
      }),
    );
}
