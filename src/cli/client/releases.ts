/**
 * `pier releases`, `pier rollback [VERSION]` and `pier deploys` (CONTRACT 7): an app's
 * releases, going back to one (followed like `pier deploy`), and its deploys.
 */
import { type Command, InvalidArgumentError } from 'commander';
import { apiPath } from './api-client.js';
import { type CommonOptions, connect, withCommonOptions } from './connect.js';
import { note } from './db-common.js';
import { finishDeploy } from './deploy.js';
import { action } from './errors.js';
import { printJson, printTable, say, when } from './output.js';
import type { Deploy, Release } from './types.js';

interface AppOptions extends CommonOptions {
  app: string;
}

interface RollbackOptions extends AppOptions {
  detach?: boolean;
}

/** Registers `pier releases`, `pier rollback` and `pier deploys`. */
export function registerReleases(program: Command): void {
  withCommonOptions(program.command('releases').description("an app's releases, newest first"))
    .requiredOption('-a, --app <name>', 'app name')
    .action(
      action(async (opts: AppOptions) => {
        const client = await connect(opts);
        const list = await client.call<Release[]>('GET', apiPath`/v1/apps/${opts.app}/releases`);
        if (opts.json) return printJson(list);
        printTable(
          ['VERSION', 'STATUS', 'IMAGE', 'DIGEST', 'CREATED', 'LIVE'],
          list.map((r) => [
            `v${r.version}`,
            r.status,
            r.build ? `build:${r.build}` : r.image,
            shortDigest(r.imageDigest),
            when(r.createdAt),
            when(r.liveAt),
          ]),
          'No releases yet: `pier deploy` makes the first.',
        );
      }),
    );

  withCommonOptions(
    program
      .command('rollback')
      .description('deploy a recorded release again exactly (image, config, secrets)'),
  )
    .argument('[version]', 'the release (default: the one live before the current one)', version)
    .requiredOption('-a, --app <name>', 'app name')
    .option('--detach', 'return once the deploy is accepted, without following it')
    .action(
      action(async (target: number | undefined, opts: RollbackOptions) => {
        const client = await connect(opts);
        const accepted = await client.call<Deploy>(
          'POST',
          apiPath`/v1/apps/${opts.app}/rollback`,
          target === undefined ? {} : { version: target },
        );
        const to = accepted.rollbackOf === undefined ? '' : ` to v${accepted.rollbackOf}`;
        note(`Rolling ${opts.app} back${to}: deploy ${accepted.id}.`);
        if (opts.detach) return opts.json ? printJson(accepted) : say(accepted.id);
        await finishDeploy(client, opts.app, accepted, opts.json);
      }),
    );

  withCommonOptions(program.command('deploys').description("an app's deploys, newest first"))
    .requiredOption('-a, --app <name>', 'app name')
    .action(
      action(async (opts: AppOptions) => {
        const client = await connect(opts);
        const list = await client.call<Deploy[]>('GET', apiPath`/v1/apps/${opts.app}/deploys`);
        if (opts.json) return printJson(list);
        printTable(
          ['ID', 'STATUS', 'IMAGE', 'STRATEGY', 'RELEASE', 'CREATED', 'FINISHED', 'DETAIL'],
          list.map((d) => [
            d.id,
            d.status,
            d.image,
            d.strategy,
            d.release === undefined ? '-' : `v${d.release}`,
            when(d.createdAt),
            when(d.finishedAt),
            detail(d),
          ]),
          'No deploys yet.',
        );
      }),
    );
}

/** A version as typed: `3` or `v3`. */
function version(value: string): number {
  const m = /^v?(\d+)$/.exec(value.trim());
  if (!m || Number(m[1]) < 1)
    throw new InvalidArgumentError('give a release version, e.g. 3 or v3.');
  return Number(m[1]);
}

/** `sha256:0123456789ab`: enough to tell releases apart. */
function shortDigest(digest: string): string {
  return digest.replace(/^(sha256:[0-9a-f]{12})[0-9a-f]+$/, '$1');
}

/** What a person wants to know beyond the status: why it failed, where it is, what it undid. */
function detail(d: Deploy): string {
  if (d.status === 'error') return d.error ?? '';
  const parts = [];
  if (d.rollbackOf !== undefined) parts.push(`rollback to v${d.rollbackOf}`);
  if (d.status !== 'done' && d.step) parts.push(d.step);
  return parts.join('; ');
}
