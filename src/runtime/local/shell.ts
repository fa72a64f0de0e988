/**
 * Shell sessions inside a running machine (`MachineRuntime.shell`). The session's process
 * is `nsenter` into every namespace of the machine's main process (user, mount, uts, ipc,
 * net, pid, cgroup), under its root and in its working directory, as its uid and gid,
 * with its environment; nsenter forks once more so the command is a member of the
 * machine's pid namespace. It runs on a pseudo-terminal (node-pty) or on plain pipes.
 *
 * The cgroup: nsenter is moved into the machine's cgroup synchronously right after the
 * spawn, before it has entered the namespaces and forked, so the command is born inside
 * (its memory, CPU and pids limits apply, and a suspend freezes it with the machine);
 * `adopt` then catches anything quicker. The caller holds back input until `ready`.
 *
 * Ending a session kills the whole process tree it started: nsenter does not pass
 * signals on, and a command without a terminal gets no SIGHUP.
 */
import { spawn as spawnChild } from 'node:child_process';
import { constants } from 'node:os';
import { spawn as spawnPty } from 'node-pty';
import type { CgroupSet } from '../../host/cgroups/cgroup.js';
import type { GuestProcess, GuestSession, ShellOptions } from '../runtime.js';
import { killTree } from '../sandbox/proc.js';

const NSENTER = '/usr/bin/nsenter';

/** nsenter's arguments for a session in `guest`'s machine, running `argv`. */
export function nsenterArgs(mainPid: number, guest: GuestProcess, argv: string[]): string[] {
  return [
    `--target=${mainPid}`,
    '--user',
    '--mount',
    '--uts',
    '--ipc',
    '--net',
    '--pid',
    '--cgroup',
    '--root',
    '--wd',
    `--setuid=${guest.uid}`,
    `--setgid=${guest.gid}`,
    '--',
    ...argv,
  ];
}

/**
 * Starts a session; resolves once it is in the machine's cgroup (the caller may then
 * pass input). `mainPid` is the machine's main process, whose namespaces, root and
 * working directory the session takes.
 */
export async function startShell(
  cgroups: CgroupSet,
  guest: GuestProcess,
  opts: ShellOptions,
): Promise<GuestSession> {
  const argv = opts.argv ?? ['/bin/sh'];
  const env = {
    ...guest.env,
    ...(opts.tty ? { TERM: guest.env.TERM ?? 'xterm-256color' } : {}),
  };
  const args = nsenterArgs(guest.mainPid, guest, argv);
  const session = opts.tty ? ptySession(args, env, opts) : pipeSession(args, env);
  try {
    cgroups.enterNow(guest.cgroup, session.pid);
    await cgroups.adopt(guest.cgroup, session.pid);
  } catch (err) {
    // Gone already (a command that failed at once) is fine: its exit is reported.
    if (!/no such process/.test((err as Error).message)) {
      await killTree(session.pid);
      throw err;
    }
  }
  return session;
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

function ptySession(args: string[], env: Record<string, string>, opts: ShellOptions): GuestSession {
  const pty = spawnPty(NSENTER, args, {
    name: env.TERM ?? 'xterm-256color',
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

function pipeSession(args: string[], env: Record<string, string>): GuestSession {
  const child = spawnChild(NSENTER, args, { env, cwd: '/', stdio: ['pipe', 'pipe', 'pipe'] });
  if (child.pid === undefined) throw new Error('nsenter could not be started');
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
