/**
 * `pier machines`: an app's machines (spec 4.9). List, show, the actions and wait live
 * here; run in machines-run.ts, logs in machines-logs.ts, exec and `pier ssh` in
 * machines-exec.ts, cp in machines-cp.ts.
 */
import { type Command, Option } from 'commander';
import { type ApiClient, apiPath } from './api-client.js';
import { type CommonOptions, connect, withCommonOptions } from './connect.js';
import { wholeNumber } from './db-common.js';
import { ApiCallError, CliError, action } from './errors.js';
import { StatusLine, confirm, stateText } from './machines-common.js';
import { registerMachineCp } from './machines-cp.js';
import { registerMachineExec } from './machines-exec.js';
import { registerMachineLogs } from './machines-logs.js';
import { registerMachineRun } from './machines-run.js';
import { MACHINE_STATES, type Machine, type MachineState } from './machines-types.js';
import { printFields, printJson, printTable, say, when } from './output.js';
import { registerVolumes } from './volumes.js';

type Action = 'start' | 'stop' | 'suspend' | 'destroy';

/** Wording of each action: the command's help, the progress line, the result. */
const ACTIONS: Record<Action, { help: string; doing: string; done: string }> = {
  start: {
    help: 'start a stopped machine, or resume a suspended one',
    doing: 'Starting',
    done: 'is running',
  },
  stop: { help: 'stop a machine (its disk is kept)', doing: 'Stopping', done: 'is stopped' },
  suspend: {
    help: 'freeze a machine, keeping its memory',
    doing: 'Suspending',
    done: 'is suspended',
  },
  destroy: { help: 'destroy a machine and its disk', doing: 'Destroying', done: 'is destroyed' },
};

/** The wait route holds at most this long per request; longer waits are several requests. */
const WAIT_CHUNK_S = 10;

interface ActionOptions extends CommonOptions {
  yes?: boolean;
}

interface WaitOptions extends CommonOptions {
  state: MachineState;
  timeout: number;
}

/** Registers `pier machines`, beside it `pier exec` and `pier ssh`, and `pier volumes`. */
export function registerMachines(program: Command): void {
  const machines = program
    .command('machines')
    .description('machines of an app: run, inspect, control, logs, exec and copy files');

  registerMachineRun(machines);

  withCommonOptions(machines.command('list').description("list an app's machines"))
    .argument('<app>', 'app name')
    .action(
      action(async (app: string, opts: CommonOptions) => {
        const client = await connect(opts);
        const list = await client.call<Machine[]>('GET', apiPath`/v1/apps/${app}/machines`);
        if (opts.json) return printJson(list);
        printTable(
          ['ID', 'STATE', 'IMAGE', 'PRIVATE-IP', 'REGION', 'CREATED'],
          list.map((m) => [
            m.id,
            stateText(m),
            m.config.image ?? '-',
            m.privateIp ?? '-',
            m.region,
            when(m.createdAt),
          ]),
          `No machines in ${app}.`,
        );
      }),
    );

  withCommonOptions(machines.command('show').description('show one machine'))
    .argument('<id>', 'machine id (mch-…)')
    .action(
      action(async (id: string, opts: CommonOptions) => {
        const m = await (await connect(opts)).call<Machine>('GET', apiPath`/v1/machines/${id}`);
        if (opts.json) return printJson(m);
        printFields(machineFields(m));
        if (m.createBootLog) say('', 'Boot log:', m.createBootLog.trimEnd());
      }),
    );

  for (const name of Object.keys(ACTIONS) as Action[]) {
    const cmd = withCommonOptions(machines.command(name).description(ACTIONS[name].help)).argument(
      '<id>',
      'machine id (mch-…)',
    );
    if (name === 'destroy') cmd.option('--yes', 'do not ask; needed when stdin is not a terminal');
    cmd.action(
      action(async (id: string, opts: ActionOptions) => {
        const client = await connect(opts);
        if (name === 'destroy' && !opts.yes) {
          const m = await client.call<Machine>('GET', apiPath`/v1/machines/${id}`);
          await confirm(
            `Destroy machine ${m.id} of app ${m.appName} with its disk?`,
            `refusing to destroy ${id}`,
          );
        }
        await runAction(client, id, name, opts);
      }),
    );
  }

  withCommonOptions(
    machines
      .command('wait')
      .description('wait until a machine is in a state (default running); exits 1 on timeout'),
  )
    .argument('<id>', 'machine id (mch-…)')
    .addOption(
      new Option('--state <state>', 'the state to wait for')
        .choices(MACHINE_STATES)
        .default('running'),
    )
    .option('--timeout <seconds>', 'give up after this long', wholeNumber, 60)
    .action(
      action(async (id: string, opts: WaitOptions) => {
        const client = await connect(opts);
        const m = await waitForState(client, id, opts.state, opts.timeout);
        if (opts.json) return printJson(m);
        say(`Machine ${m.id} is ${m.observedState}.`);
      }),
    );

  registerMachineLogs(machines);
  registerMachineCp(machines);
  registerMachineExec(machines, program);
  registerVolumes(program);
}

/** Runs one action with a progress line; the API answers once the action is done. */
async function runAction(
  client: ApiClient,
  id: string,
  name: Action,
  opts: CommonOptions,
): Promise<void> {
  const line = new StatusLine();
  line.show(`${ACTIONS[name].doing} ${id}…`);
  let m: Machine;
  try {
    m = await client.call<Machine>('POST', apiPath`/v1/machines/${id}/${name}`);
  } finally {
    line.end();
  }
  if (opts.json) return printJson(m);
  say(`Machine ${m.id} ${ACTIONS[name].done} (${m.observedState}, after ${line.elapsed()}).`);
}

/**
 * Holds on the wait route in chunks of WAIT_CHUNK_S, so the person sees the state move
 * and `--timeout` may exceed the route's own 300 s bound. The route also returns early
 * for a machine that failed or was deleted: that is not the state asked for, so it is an
 * error here.
 */
export async function waitForState(
  client: ApiClient,
  id: string,
  state: MachineState,
  timeoutS: number,
): Promise<Machine> {
  const line = new StatusLine();
  const deadline = performance.now() + timeoutS * 1000;
  line.show(`Waiting for ${id} to be ${state}…`);
  for (;;) {
    const leftS = Math.ceil((deadline - performance.now()) / 1000);
    const chunk = Math.max(1, Math.min(WAIT_CHUNK_S, leftS));
    let m: Machine;
    try {
      m = await client.call<Machine>(
        'GET',
        `${apiPath`/v1/machines/${id}/wait`}?state=${state}&timeout=${chunk}`,
      );
    } catch (err) {
      if (!(err instanceof ApiCallError && err.code === 'wait-timeout')) {
        line.end();
        throw err;
      }
      const now = await client
        .call<Machine>('GET', apiPath`/v1/machines/${id}`)
        .catch(() => undefined);
      const where = now ? now.observedState : 'not there yet';
      if (performance.now() >= deadline || leftS <= chunk) {
        line.end();
        throw new ApiCallError(
          408,
          'wait-timeout',
          `machine ${id} is ${where}; it did not become ${state} within ${timeoutS}s`,
        );
      }
      line.show(`${id}: ${where}, waiting for ${state}  ${line.elapsed()}`, where);
      continue;
    }
    line.end();
    if (m.observedState !== state) {
      const why = m.createError ? `: ${m.createError}` : '';
      throw new CliError(
        `machine ${id} is ${m.observedState}, so it will not become ${state}${why}`,
      );
    }
    return m;
  }
}

/** The `show` block; undefined values are left out by printFields. */
function machineFields(m: Machine): [string, string | undefined][] {
  const c = m.config;
  const cmd = Array.isArray(c.command) ? (c.command as string[]).join(' ') : undefined;
  return [
    ['ID', m.id],
    ['App', m.appName],
    ['State', stateText(m)],
    ['Image', c.image],
    ['Size', `${c.vcpus ?? '?'} vCPU, ${c.memoryMb ?? '?'} MB`],
    ['Port', c.internalPort !== undefined ? String(c.internalPort) : undefined],
    ['Start', typeof c.start === 'string' ? c.start : undefined],
    ['Command', cmd],
    ['Private IP', m.privateIp],
    ['Region', m.region],
    ['Host', m.host],
    ['Boot', m.bootMs !== undefined ? `${m.bootMs} ms` : undefined],
    ['Restarts', String(m.restarts)],
    [
      'Error',
      m.createError ? `${m.createError} (${m.createErrorCode ?? 'create-failed'})` : undefined,
    ],
    ['Warning', m.createWarning],
    ['Ready', m.readyAt ? when(m.readyAt) : undefined],
    ['Created', when(m.createdAt)],
  ];
}
