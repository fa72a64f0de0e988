/** `pier apps list|create|show|delete` (CONTRACT 3), and `pier apps git` (apps-git.ts). */
import type { Command } from 'commander';
import { apiPath } from './api-client.js';
import { registerAppsGit } from './apps-git.js';
import { type CommonOptions, connect, withCommonOptions } from './connect.js';
import { action } from './errors.js';
import { printFields, printJson, printTable, say, when } from './output.js';
import type { App } from './types.js';

/** Registers `pier apps`. */
export function registerApps(program: Command): void {
  const apps = program.command('apps').description('apps of the organization');

  withCommonOptions(apps.command('list').description('list apps')).action(
    action(async (opts: CommonOptions) => {
      const list = await (await connect(opts)).call<App[]>('GET', '/v1/apps');
      if (opts.json) return printJson(list);
      printTable(
        ['NAME', 'ID', 'ADDRESS', 'CREATED'],
        list.map((a) => [a.name, a.id, a.defaultAddress, when(a.createdAt)]),
        'No apps.',
      );
    }),
  );

  withCommonOptions(apps.command('create').description('create an app'))
    .argument('<name>', '1-63 lowercase letters, digits and hyphens; unique on the platform')
    .action(
      action(async (name: string, opts: CommonOptions) => {
        const app = await (await connect(opts)).call<App>('POST', '/v1/apps', { name });
        if (opts.json) return printJson(app);
        say(`Created app ${app.name} (${app.id}) at ${app.defaultAddress}.`);
      }),
    );

  withCommonOptions(apps.command('show').description('show one app'))
    .argument('<name>', 'app name')
    .action(
      action(async (name: string, opts: CommonOptions) => {
        const app = await (await connect(opts)).call<App>('GET', apiPath`/v1/apps/${name}`);
        if (opts.json) return printJson(app);
        printFields([
          ['Name', app.name],
          ['ID', app.id],
          ['Organization', app.orgId],
          ['Address', app.defaultAddress],
          ['Created', when(app.createdAt)],
        ]);
      }),
    );

  withCommonOptions(
    apps.command('delete').description('delete an app: destroys its machines and secrets'),
    { json: false },
  )
    .argument('<name>', 'app name')
    .action(
      action(async (name: string, opts: CommonOptions) => {
        await (await connect(opts)).call('DELETE', apiPath`/v1/apps/${name}`);
        say(`Deleted app ${name}.`);
      }),
    );

  registerAppsGit(apps);
}
