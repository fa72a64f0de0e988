/**
 * `pier apps git NAME [--production-branch BRANCH | --no-production-branch]
 * [--branch-previews on|off]` (issue #26; docs/api.md "git push"): shows an app's Git
 * settings and push URLs, or changes them first when a setting is given.
 */
import { type Command, InvalidArgumentError } from 'commander';
import { apiPath } from './api-client.js';
import { type CommonOptions, connect, withCommonOptions } from './connect.js';
import { action } from './errors.js';
import { printFields, printJson } from './output.js';
import type { AppGit } from './types.js';

interface GitOptions extends CommonOptions {
  /** A branch; false (`--no-production-branch`): back to the default. */
  productionBranch?: string | false;
  branchPreviews?: boolean;
}

const SWITCH: Record<string, boolean> = { on: true, off: false, true: true, false: false };

/** `on` or `off` (also `true`, `false`). */
function onOff(value: string): boolean {
  const v = SWITCH[value.trim().toLowerCase()];
  if (v === undefined) throw new InvalidArgumentError('give on or off.');
  return v;
}

function showGit(g: AppGit): void {
  const production = g.productionBranches.join(' or ');
  printFields([
    ['App', g.app],
    ['Production branch', g.productionBranch === null ? `${production} (the default)` : production],
    [
      'Branch previews',
      g.previewOf !== undefined
        ? `off: ${g.app} is a preview of ${g.previewOf}, and makes none`
        : g.branchPreviews
          ? `on: a push of another branch deploys its preview ${g.app}--<branch>`
          : 'off: a push of another branch is stored, and deploys nothing',
    ],
    ['Push over HTTPS', g.pushUrls.https],
    ['Push over SSH', g.pushUrls.ssh],
  ]);
}

/** Registers `pier apps git` under `pier apps`. */
export function registerAppsGit(apps: Command): void {
  withCommonOptions(
    apps
      .command('git')
      .description(
        "an app's git push settings: the branch that deploys it, and whether other branches deploy previews",
      ),
  )
    .argument('<name>', 'app name')
    .option('--production-branch <branch>', 'the branch whose push deploys the app')
    .option('--no-production-branch', 'back to the default: main or master deploys the app')
    .option(
      '--branch-previews <on|off>',
      'whether a push of another branch deploys its preview (off: it is only stored)',
      onOff,
    )
    .action(
      action(async (name: string, opts: GitOptions) => {
        const client = await connect(opts);
        const body: Record<string, unknown> = {};
        if (opts.productionBranch !== undefined) {
          body.productionBranch = opts.productionBranch === false ? null : opts.productionBranch;
        }
        if (opts.branchPreviews !== undefined) body.branchPreviews = opts.branchPreviews;
        const path = apiPath`/v1/apps/${name}/git`;
        const g =
          Object.keys(body).length === 0
            ? await client.call<AppGit>('GET', path)
            : await client.call<AppGit>('PUT', path, body);
        if (opts.json) return printJson(g);
        showGit(g);
      }),
    );
}
