/**
 * `pier machines run`: creates a machine (spec 2.12) and follows it until it runs. The
 * create is sent with `wait=false`, so the answer comes at once and the record is polled
 * for the progress line; a start that fails ends with the machine's own error code and
 * boot log, as the waiting create would have answered them.
 */
import { readFile } from 'node:fs/promises';
import { type Command, InvalidArgumentError, Option } from 'commander';
import { type ApiClient, apiPath } from './api-client.js';
import { type CommonOptions, collect, connect, withCommonOptions } from './connect.js';
import { wholeNumber } from './db-common.js';
import { ApiCallError, CliError, action } from './errors.js';
import { StatusLine, createPhase, sleep, transient } from './machines-common.js';
import type { Machine } from './machines-types.js';
import { printJson, say } from './output.js';

interface RunOptions extends CommonOptions {
  config?: string;
  class?: string;
  vcpus?: number;
  memory?: number;
  disk?: number;
  env?: string[];
  port?: number;
  expose?: number[];
  start?: string;
  readiness?: 'port' | 'boot';
  volumeGb?: number;
  region?: string;
  wait: boolean;
}

/** How often the record is read while the machine is made. */
const POLL_MS = 250;
/** How long the API may stay unreachable (a restarting server) before giving up. */
const OUTAGE_LIMIT_MS = 60_000;
/** States in which the machine is still on its way to running. */
const ON_THE_WAY = new Set(['requested', 'scheduled', 'starting']);

/** Registers `pier machines run`. */
export function registerMachineRun(machines: Command): void {
  withCommonOptions(
    machines
      .command('run')
      .description('create a machine from an image and wait until it runs')
      .addHelpText(
        'after',
        `
Arguments after -- replace the image's Cmd; --start replaces Entrypoint and Cmd
with \`/bin/sh -c START\`. Flags override the fields of --config.

Examples:
  pier machines run web registry.example.com/web:1 --port 8080 --env MODE=prod
  pier machines run jobs busybox:latest --readiness boot -- sleep 3600`,
      ),
  )
    .argument('<app>', 'app name')
    .argument('<image>', 'OCI image reference')
    .argument('[command...]', "replaces the image's Cmd; put it after --")
    .option('--config <file>', 'a JSON machine config (spec 2.12) to start from')
    .option('--class <class>', 'a named size, e.g. shared-cpu-1x')
    .option('--vcpus <n>', 'virtual CPUs, 1-16 (default: 1)', wholeNumber)
    .option('--memory <mb>', 'memory in MB, 128-16384 (default: 512)', wholeNumber)
    .option('--disk <mb>', 'writable disk in MB, 512-131072 (default: 2048)', wholeNumber)
    .option('--env <name=value>', 'an environment variable; repeatable', collect)
    .option('--port <n>', 'the port the machine serves on (default: 3000)', wholeNumber)
    .option('--expose <port>', 'another port to expose; repeatable', collectPort)
    .option('--start <cmd>', 'run `/bin/sh -c CMD` instead of the image entrypoint')
    .addOption(
      new Option('--readiness <how>', 'ready once the port answers, or once booted').choices([
        'port',
        'boot',
      ]),
    )
    .option('--volume-gb <gb>', 'give the app a volume of this size at /data', wholeNumber)
    .option('--region <region>', 'where to run it (default: the organization region)')
    .option('--no-wait', 'return as soon as the machine is requested')
    .action(
      action(async (app: string, image: string, command: string[], opts: RunOptions) => {
        const body = await createBody(image, command, opts);
        const client = await connect(opts);
        const line = new StatusLine();
        line.show(`Creating a machine in ${app}…`);
        let created: Machine;
        try {
          created = await client.call<Machine>(
            'POST',
            `${apiPath`/v1/apps/${app}/machines`}?wait=false`,
            body,
          );
        } finally {
          line.end();
        }
        if (!opts.wait) {
          if (opts.json) return printJson(created);
          say(`${created.id} ${created.observedState}`);
          return;
        }
        line.note(`Machine ${created.id} created; Ctrl-C stops waiting (the machine stays).`);
        const m = await followCreate(client, created, line);
        if (opts.json) return printJson(m);
        const boot = m.bootMs !== undefined ? `running (booted in ${m.bootMs} ms)` : 'running';
        say(`Machine ${m.id} is ${boot}, private IP ${m.privateIp ?? '-'}.`);
        if (m.createWarning) line.note(`Warning: ${m.createWarning}`);
      }),
    );
}

/** Polls the record until the machine runs; a failed start is thrown with its cause. */
async function followCreate(
  client: ApiClient,
  created: Machine,
  line: StatusLine,
): Promise<Machine> {
  let m = created;
  let unreachableSince: number | undefined;
  while (ON_THE_WAY.has(m.observedState)) {
    line.show(`${m.id}: ${createPhase(m.observedState)}…  ${line.elapsed()}`, m.observedState);
    await sleep(POLL_MS);
    try {
      m = await client.call<Machine>('GET', apiPath`/v1/machines/${m.id}`);
      unreachableSince = undefined;
    } catch (err) {
      unreachableSince ??= performance.now();
      if (!transient(err) || performance.now() - unreachableSince > OUTAGE_LIMIT_MS) {
        line.end();
        throw err;
      }
    }
  }
  line.end();
  if (m.observedState === 'running') return m;
  if (m.createBootLog) line.note(`Boot log of ${m.id}:\n${m.createBootLog.trimEnd()}`);
  const code = m.createErrorCode ?? 'create-failed';
  const why = m.createError ?? `the machine is ${m.observedState}`;
  line.note(`The machine ${m.id} is kept; \`pier machines destroy ${m.id}\` removes it.`);
  throw new ApiCallError(503, code, why);
}

/** The create body: --config first, then the flags over it. The server checks values. */
async function createBody(
  image: string,
  command: string[],
  opts: RunOptions,
): Promise<Record<string, unknown>> {
  const body: Record<string, unknown> = opts.config ? await readConfig(opts.config) : {};
  body.image = image;
  if (command.length > 0) body.command = command;
  if (opts.class !== undefined) body.class = opts.class;
  if (opts.vcpus !== undefined) body.vcpus = opts.vcpus;
  if (opts.memory !== undefined) body.memoryMb = opts.memory;
  if (opts.disk !== undefined) body.diskMb = opts.disk;
  if (opts.env) body.env = { ...(body.env as object | undefined), ...parseEnv(opts.env) };
  if (opts.port !== undefined) body.internalPort = opts.port;
  if (opts.expose) body.exposePorts = opts.expose;
  if (opts.start !== undefined) body.start = opts.start;
  if (opts.readiness !== undefined) body.readiness = opts.readiness;
  if (opts.volumeGb !== undefined) body.volumeGb = opts.volumeGb;
  if (opts.region !== undefined) body.region = opts.region;
  return body;
}

async function readConfig(file: string): Promise<Record<string, unknown>> {
  const text = await readFile(file, 'utf8').catch((err: NodeJS.ErrnoException) => {
    throw new CliError(`cannot read ${file}: ${err.code ?? err.message}`);
  });
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw new CliError(`${file} is not JSON: ${(err as Error).message}`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new CliError(`${file} must hold a JSON object (a machine config)`);
  }
  return parsed as Record<string, unknown>;
}

/** `NAME=value` pairs; the value may hold `=` and be empty. */
export function parseEnv(pairs: string[]): Record<string, string> {
  const env: Record<string, string> = {};
  for (const pair of pairs) {
    const at = pair.indexOf('=');
    if (at <= 0) throw new CliError(`--env wants NAME=value, got '${pair}'`);
    env[pair.slice(0, at)] = pair.slice(at + 1);
  }
  return env;
}

function collectPort(value: string, previous: number[] | undefined): number[] {
  if (!/^\d+$/.test(value)) throw new InvalidArgumentError('give a port number.');
  return [...(previous ?? []), Number(value)];
}
