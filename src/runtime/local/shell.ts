/**
 * Shell sessions inside a running machine (`MachineRuntime.shell`): `runc exec`, which
 * joins every namespace and the cgroup of the machine and gives the session exactly what
 * the machine's process has: its user, working directory and environment, its
 * capabilities, no_new_privs and its seccomp filter. So a session can never hold more
 * than the machine's own process. It runs on a pseudo-terminal (node-pty; runc then makes
 * a terminal inside and relays, resizes included) or on plain pipes.
 *
 * Ending a session kills the whole process tree it started (runc, and what it runs).
 */
import { spawn as spawnChild } from 'node:child_process';
import { constants } from 'node:os';
import { spawn as spawnPty } from 'node-pty';
import type { GuestProcess, GuestSession, ShellOptions } from '../runtime.js';
import { killTree } from '../sandbox/proc.js';

/**
 * The command of a session running `argv` in sandbox `id`: `runc` (`runcCommand` is
 * `runc --root …`) `exec`, with a terminal and its TERM when `term` is given.
 */
export function execCommand(
  runcCommand: string[],
  id: string,
  argv: string[],
  term?: string,
): string[] {
  const tty = term === undefined ? [] : ['--tty', '--env', `TERM=${term}`];
  return [...runcCommand, 'exec', ...tty, id, ...argv];
}

/** Starts a session in sandbox `id`, whose main process `guest` describes. */
export function startShell(
  runcCommand: string[],
  id: string,
  guest: GuestProcess,
  opts: ShellOptions,
): GuestSession {
  const argv = opts.argv ?? ['/bin/sh'];
  const term = opts.tty ? (guest.env.TERM ?? 'xterm-256color') : undefined;
  const [file, ...args] = execCommand(runcCommand, id, argv, term) as [string, ...string[]];
  const env = { PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' };
  return opts.tty ? ptySession(file, args, env, opts) : pipeSession(file, args, env);
}

type Listeners = {
  data: ((stream: 'stdout' | 'stderr', data: Buffer) => void)[];
  exit: ((code: number | null, signal: NodeJS.Signals | null) => void)[];
};

/** The parts every session shares: listeners, and an exit reported once. */
function base(pid: number) {
  const listeners: Listeners = { data: [], exit: [] };
  // Output before anyone listens (the command may write while the cgroup is adopted) is kept.
  const early: ['stdout' | 'stderr', Buffer][] = [];
  let ended: [number | null, NodeJS.Signals | null] | undefined;
  return {
    listeners,
    emitData: (stream: 'stdout' | 'stderr', data: Buffer) => {
      if (listeners.data.length === 0) early.push([stream, data]);
      for (const l of listeners.data) l(stream, data);
    },
    emitExit: (code: number | null, signal: NodeJS.Signals | null) => {
      if (ended) return;
      ended = [code, signal];
      for (const l of listeners.exit) l(code, signal);
    },
    common: {
      pid,
      kill: (signal: NodeJS.Signals = 'SIGKILL') => void killTree(pid, signal),
      onData: (l: Listeners['data'][number]) => {
        listeners.data.push(l);
        for (const [stream, data] of early.splice(0)) l(stream, data);
      },
      onExit: (l: Listeners['exit'][number]) => {
        if (ended) l(...ended);
        else listeners.exit.push(l);
      },
    },
  };
}

/** The name of signal number `n`, if it has one. */
function signalName(n: number | undefined): NodeJS.Signals | null {
  if (!n) return null;
  const found = Object.entries(constants.signals).find(([, v]) => v === n);
  return (found?.[0] as NodeJS.Signals | undefined) ?? null;
}

function ptySession(
  file: string,
  args: string[],
  env: Record<string, string>,
  opts: ShellOptions,
): GuestSession {
  const pty = spawnPty(file, args, {
    name: 'xterm-256color',
    cols: opts.cols,
    rows: opts.rows,
    cwd: '/',
    env,
    encoding: null,
  });
  const b = base(pty.pid);
  pty.onData((d) => b.emitData('stdout', Buffer.from(d as unknown as Uint8Array)));
  pty.onExit(({ exitCode, signal }) => b.emitExit(signal ? null : exitCode, signalName(signal)));
  return {
    ...b.common,
    write: (data) => pty.write(data),
    // A terminal has no end of input of its own: ^D asks the shell for it.
    end: () => pty.write('\x04'),
    resize: (cols, rows) => pty.resize(cols, rows),
  };
}

function pipeSession(file: string, args: string[], env: Record<string, string>): GuestSession {
  const child = spawnChild(file, args, { env, cwd: '/', stdio: ['pipe', 'pipe', 'pipe'] });
  if (child.pid === undefined) throw new Error('runc could not be started');
  const b = base(child.pid);
  child.stdout.on('data', (d: Buffer) => b.emitData('stdout', d));
  child.stderr.on('data', (d: Buffer) => b.emitData('stderr', d));
  child.stdin.on('error', () => {}); // the command may exit before reading its input
  child.on('close', (code, signal) => b.emitExit(code, signal));
  return {
    ...b.common,
    write: (data) => void child.stdin.write(data),
    end: () => void child.stdin.end(),
    resize: () => {},
  };
}
