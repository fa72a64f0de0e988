/**
 * `pier previews [list] --app NAME`, `pier previews create NAME --app NAME [--ttl 3d]` and
 * `pier previews delete NAME --app NAME` (issue #26 item 3): an app's preview
 * environments. Create waits until the preview is ready (or failed), printing what it
 * does meanwhile on stderr; `--no-wait` returns at once.
 */
import { type Command, InvalidArgumentError } from 'commander';
import { type ApiClient, apiPath } from './api-client.js';
import { type CommonOptions, connect, withCommonOptions } from './connect.js';
import { note } from './db-common.js';
import { CliError, action } from './errors.js';
import { printJson, printTable, say, when } from './output.js';
import type { Preview } from './types.js';

interface AppOptions extends CommonOptions {
  app: string;
}

interface CreateOptions extends AppOptions {
  ttl?: number;
  wait: boolean;
}

const UNITS: Record<string, number> = { '': 1, s: 1, m: 60, h: 3600, d: 86400 };

/** A lifetime as typed: `3600`, `90m`, `12h`, `7d`. */
function duration(value: string): number {
  const m = /^(\d+)\s*([smhd]?)$/.exec(value.trim());
  if (!m) throw new InvalidArgumentError('give a duration, e.g. 12h, 3d or 3600 (seconds).');
  return Number(m[1]) * UNITS[m[2]!]!;
}

const POLL_MS = 500;

/** Polls the preview until it leaves `creating`, noting each new step. */
async function waitForPreview(client: ApiClient, app: string, name: string): Promise<Preview> {
  let last = '';
  for (;;) {
    const p = await client.call<Preview>('GET', apiPath`/v1/apps/${app}/previews/${name}`);
    if (p.state !== 'creating') return p;
    if (p.stateReason && p.stateReason !== last) note(`${p.appName}: ${(last = p.stateReason)}`);
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
}

/** Registers `pier previews`. */
export function registerPreviews(program: Command): void {
  const previews = program
    .command('previews')
    .description("an app's preview environments (<app>--<preview>)");

  withCommonOptions(
    previews.command('list', { isDefault: true }).description("list an app's previews"),
  )
    .requiredOption('-a, --app <name>', 'app name')
    .action(
      action(async (opts: AppOptions) => {
        const client = await connect(opts);
        const list = await client.call<Preview[]>('GET', apiPath`/v1/apps/${opts.app}/previews`);
        if (opts.json) return printJson(list);
        printTable(
          ['NAME', 'STATE', 'ADDRESS', 'RELEASE', 'DATABASES', 'EXPIRES', 'DETAIL'],
          list.map((p) => [
            p.name,
            p.state,
            p.defaultAddress,
            p.release === undefined ? '-' : `v${p.release}`,
            p.databases.map((d) => d.branch).join(', ') || '-',
            when(p.expiresAt),
            p.stateReason ?? '',
          ]),
          `No previews of ${opts.app}: \`pier previews create NAME --app ${opts.app}\` makes one.`,
        );
      }),
    );

  withCommonOptions(
    previews
      .command('create')
      .description('make a preview: its own address, the live release, branches of the databases'),
  )
    .argument('<name>', 'the preview’s name; the app it makes is <app>--<name>')
    .requiredOption('-a, --app <name>', 'app name')
    .option('--ttl <duration>', 'remove it after this long (1h to 30d; default 7d)', duration)
    .option('--no-wait', 'return once it is accepted instead of waiting until it is ready')
    .action(
      action(async (name: string, opts: CreateOptions) => {
        const client = await connect(opts);
        const body = { name, ...(opts.ttl !== undefined ? { ttlSeconds: opts.ttl } : {}) };
        const made = await client.call<Preview>(
          'POST',
          apiPath`/v1/apps/${opts.app}/previews`,
          body,
        );
        note(`Making ${made.appName} (until ${when(made.expiresAt)}).`);
        const p = opts.wait ? await waitForPreview(client, opts.app, name) : made;
        if (opts.json) printJson(p);
        else
          say(
            p.state === 'ready'
              ? `${p.appName} is ready: ${p.defaultAddress}`
              : `${p.appName}: ${p.state}`,
          );
        if (p.state === 'failed') throw new CliError(`the preview failed: ${p.stateReason ?? ''}`);
      }),
    );

  withCommonOptions(
    previews.command('delete').description('delete a preview and exactly what it made'),
  )
    .argument('<name>', 'the preview’s name')
    .requiredOption('-a, --app <name>', 'app name')
    .action(
      action(async (name: string, opts: AppOptions) => {
        const client = await connect(opts);
        await client.call('DELETE', apiPath`/v1/apps/${opts.app}/previews/${name}`);
        if (opts.json) return printJson({ deleted: name });
        say(`Deleted the preview ${name} of ${opts.app}.`);
      }),
    );
}
