/**
 * `pier deploy [DIR] --app NAME`: packs the directory (source-pack.ts), uploads it with a
 * meter, builds it while its log streams to stderr, deploys `build:<id>` and follows the
 * deploy step by step, then prints the app's URL on stdout. `--image` deploys an image
 * without a build; `--detach` returns once the deploy is accepted. Notes and logs go to
 * stderr so stdout holds only what a script wants (the URL, or the JSON of `--json`).
 */
import path from 'node:path';
import { type Command, Option } from 'commander';
import { type ApiClient, apiPath } from './api-client.js';
import { type CommonOptions, withCommonOptions } from './connect.js';
import { note, wholeNumber } from './db-common.js';
import { appUrl, describeSource, finishBuild, followDeploy, uploadSource } from './deploy-flow.js';
import { CliError, action } from './errors.js';
import { type Credentials, credentials } from './machines-common.js';
import { printJson, say } from './output.js';
import { progressWanted } from './progress.js';
import { packSource } from './source-pack.js';
import type { Build, Deploy, Release, Source } from './types.js';

interface DeployOptions extends CommonOptions {
  app: string;
  dockerfile?: string;
  strategy?: 'rolling' | 'immediate';
  image?: string;
  port?: number;
  detach?: boolean;
  progress?: boolean;
}

/** Registers `pier deploy`. */
export function registerDeploy(program: Command): void {
  withCommonOptions(
    program
      .command('deploy')
      .description(
        "build a directory (or take an image) and roll the app to it; prints the app's URL",
      ),
  )
    .argument('[dir]', 'the source directory', '.')
    .requiredOption('-a, --app <name>', 'app name')
    .option(
      '--dockerfile <path>',
      'the Dockerfile, a path inside DIR (default: Dockerfile, else detected)',
    )
    .addOption(
      new Option(
        '--strategy <strategy>',
        'rolling: no request refused (default); immediate: replace at once',
      ).choices(['rolling', 'immediate']),
    )
    .option(
      '--port <n>',
      "the port the app listens on (default: the live release's, else detected, else the Dockerfile's EXPOSE, else 3000)",
      wholeNumber,
    )
    .option('--image <ref>', 'deploy this image (an OCI reference or build:<id>) without building')
    .option('--detach', 'return once the deploy is accepted, without following it')
    .option('--progress', 'show the upload meter on stderr even when it is not a terminal')
    .option('--no-progress', 'never show the upload meter')
    .addHelpText(
      'after',
      [
        '',
        "DIR is packed as a gzip'd tar honouring its .dockerignore (else its .gitignore files);",
        '.git never goes, the Dockerfile always does. Ctrl-C stops following, not the deploy.',
      ].join('\n'),
    )
    .action(action(async (dir: string, opts: DeployOptions) => deploy(dir, opts)));
}

async function deploy(dir: string, opts: DeployOptions): Promise<void> {
  if (opts.image && (opts.dockerfile || dir !== '.')) {
    throw new CliError('--image deploys without a build: drop DIR and --dockerfile');
  }
  const creds = await credentials(opts);
  let source: Source | undefined;
  let build: Build | undefined;
  if (!opts.image) ({ source, build } = await buildDirectory(creds, dir, opts));
  const image = opts.image ?? `build:${build?.id}`;
  const accepted = await creds.client.call<Deploy>('POST', apiPath`/v1/apps/${opts.app}/deploys`, {
    image,
    ...(opts.strategy ? { strategy: opts.strategy } : {}),
    ...(opts.port === undefined
      ? {}
      : { config: await withPort(creds.client, opts.app, opts.port) }),
  });
  note(`Deploying ${image} to ${opts.app} (${accepted.strategy}): deploy ${accepted.id}.`);
  if (opts.detach) {
    if (opts.json) return printJson({ source, build, deploy: accepted });
    note(`Follow it with \`pier deploys --app ${opts.app}\`.`);
    return say(accepted.id);
  }
  await finishDeploy(creds.client, opts.app, accepted, opts.json, { source, build });
}

/** Packs, uploads and builds `dir`; answers the source and the finished build. */
async function buildDirectory(
  creds: Credentials,
  dir: string,
  opts: DeployOptions,
): Promise<{ source: Source; build: Build }> {
  const dockerfile = opts.dockerfile === undefined ? undefined : insideDir(dir, opts.dockerfile);
  const packed = await packSource(dir, [dockerfile ?? 'Dockerfile']);
  let source: Source;
  try {
    for (const p of packed.unsupported) note(`(skipped ${p}: not a file, directory or link)`);
    source = await uploadSource(creds, opts.app, packed, progressWanted(opts.progress));
  } finally {
    await packed.remove();
  }
  note(describeSource(source, packed));
  const created = await creds.client.call<Build>('POST', apiPath`/v1/apps/${opts.app}/builds`, {
    source: source.id,
    ...(dockerfile ? { dockerfile } : {}),
  });
  note(`Building ${created.id}…`);
  const build = await finishBuild(creds, created.id, process.stderr);
  note(`Built ${build.id}${build.imageDigest ? ` (${build.imageDigest})` : ''}.`);
  return { source, build };
}

/**
 * A deploy's config is all or nothing (without one the server keeps the live release's),
 * so `--port` sends the live release's config with only the port changed.
 */
async function withPort(client: ApiClient, app: string, port: number) {
  const releases = await client.call<Release[]>('GET', apiPath`/v1/apps/${app}/releases`);
  const { image: _image, ...config } = releases.find((r) => r.status === 'live')?.config ?? {};
  return { ...config, internalPort: port };
}

/** `--dockerfile` as the API wants it: `/`-separated, relative to DIR, inside it. */
function insideDir(dir: string, file: string): string {
  const rel = path.relative(path.resolve(dir), path.resolve(dir, file));
  if (rel === '' || rel.startsWith('..') || path.isAbsolute(rel)) {
    throw new CliError(`--dockerfile must name a file inside ${dir}`);
  }
  return rel.split(path.sep).join('/');
}

/**
 * Follows an accepted deploy (of `pier deploy` or `pier rollback`) to its end, printing
 * its steps on stderr, then the app's URL (or, with `--json`, what was made) on stdout.
 */
export async function finishDeploy(
  client: ApiClient,
  app: string,
  accepted: Deploy,
  json: boolean | undefined,
  made: Record<string, unknown> = {},
): Promise<void> {
  const done = await followDeploy(client, accepted, (step) => note(`  ${step}`));
  const url = await appUrl(client, app);
  if (json) return printJson({ ...made, deploy: done, url });
  note(`Release v${done.release ?? '?'} of ${app} is live:`);
  say(url);
}
