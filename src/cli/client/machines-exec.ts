/**
 * `pier machines exec` (also `pier exec`) and `pier ssh`: a command or an interactive
 * shell on a machine, over the exec WebSocket (exec-client.ts). The local exit code is
 * the remote command's (128 + n for a signal), so scripts can branch on it.
 */
import type { Command } from 'commander';
import { apiPath } from './api-client.js';
import { withCommonOptions } from './connect.js';
import { ApiCallError, CliError, action } from './errors.js';
import { type ExecRequest, execCommand } from './exec-client.js';
import { type Credentials, credentials } from './machines-common.js';
import type { Machine } from './machines-types.js';

interface ExecOptions {
  apiUrl?: string;
  tty?: boolean;
}

/** Registers `pier machines exec`, `pier exec` and `pier ssh`. */
export function registerMachineExec(machines: Command, program: Command): void {
  for (const parent of [machines, program]) {
    withTtyOptions(
      withCommonOptions(
        parent
          .command('exec')
          .description('run a command on a machine, or open a shell there without one'),
        { json: false },
      ),
    )
      .argument('<id>', 'machine id (mch-…)')
      .argument('[command...]', 'the command and its arguments, after --')
      .addHelpText(
        'after',
        `
Without a command: an interactive shell (/bin/sh). Stdin is passed on (its end is sent
as end of file without a tty); the exit code is the command's.

Examples:
  pier machines exec mch-abc -- ls -l /data
  echo hi | pier exec mch-abc -- cat`,
      )
      .action(
        action(async (id: string, command: string[], opts: ExecOptions) => {
          const creds = await credentials(opts);
          process.exitCode = await run(creds, id, command, opts);
        }),
      );
  }

  withTtyOptions(
    withCommonOptions(
      program
        .command('ssh')
        .description("open a shell on an app's first running machine (or run a command)"),
      { json: false },
    ),
  )
    .argument('<app>', 'app name')
    .argument('[command...]', 'a command to run instead of the shell, after --')
    .action(
      action(async (app: string, command: string[], opts: ExecOptions) => {
        const creds = await credentials(opts);
        const list = await creds.client.call<Machine[]>('GET', apiPath`/v1/apps/${app}/machines`);
        const target = list.find((m) => m.observedState === 'running');
        if (!target) {
          const states = list.map((m) => `${m.id} ${m.observedState}`).join(', ');
          throw new CliError(
            `no running machine in ${app}` +
              (states ? ` (${states}); start one with \`pier machines start <id>\`` : ''),
          );
        }
        process.exitCode = await run(creds, target.id, command, opts);
      }),
    );
}

function withTtyOptions(cmd: Command): Command {
  return cmd
    .option('-t, --tty', 'use a terminal even with a command (default: only for a shell)')
    .option('-T, --no-tty', 'no terminal, even for a shell');
}

async function run(
  creds: Credentials,
  machineId: string,
  cmd: string[],
  opts: ExecOptions,
): Promise<number> {
  const tty = opts.tty ?? (cmd.length === 0 && process.stdin.isTTY === true);
  const req: ExecRequest = { cmd, tty };
  if (tty) {
    req.cols = process.stdout.columns || 80;
    req.rows = process.stdout.rows || 24;
  }
  try {
    return await execCommand({ apiUrl: creds.apiUrl, apiKey: creds.apiKey, machineId }, req);
  } catch (err) {
    if (err instanceof ApiCallError && err.retryAfter !== undefined) {
      throw new ApiCallError(
        err.status,
        err.code,
        `${err.message.replace(/\.?$/, '.')} Try again in ${err.retryAfter}s`,
        err.issues,
        err.retryAfter,
      );
    }
    throw err;
  }
}
