/**
 * What pier and a sandbox's keeper say to each other while it starts (over the Node IPC
 * channel, which closes once the sandbox runs), and what they leave on disk for each
 * other: the record (who the sandbox's processes are) and the exit status.
 */
import type { ProcRef } from './proc.js';

/** pier → keeper, first: everything needed to start. Holds the environment, so never on disk. */
export interface StartMessage {
  type: 'start';
  id: string;
  /** The command line: [nsenter…] [setpriv…] bwrap --args 5 -- argv… */
  command: string[];
  /** bwrap's options, written NUL-separated to fd 5 (kept out of any command line). */
  bwrapArgs: string[];
  stateDir: string;
  /** Where the keeper writes the SandboxRecord. */
  recordFile: string;
  cgroup: string;
  logMaxBytes: number;
}

/** pier → keeper, after moving bwrap into the cgroup: let the sandbox start. */
export interface GoMessage {
  type: 'go';
}

export type PierMessage = StartMessage | GoMessage;

/** keeper → pier. */
export type KeeperMessage =
  /** bwrap is blocked before its user namespace is set up: adopt `bwrap` into the cgroup. */
  | { type: 'spawned'; bwrap: number; init: number }
  /** The machine's process runs (or already ended, when `pid` is the init). */
  | { type: 'started'; pid: number }
  | { type: 'failed'; message: string };

/** Who a running sandbox's processes are; written by its keeper, read by any pier. */
export interface SandboxRecord {
  id: string;
  stateDir: string;
  cgroup: string;
  /** The keeper: the parent of bwrap, holder of the log pipes. */
  keeper: ProcRef;
  /** bwrap's outer process (its monitor), in the host's pid namespace. */
  bwrap: ProcRef;
  /** The sandbox's pid 1 (bwrap's reaper), host pid. */
  init: ProcRef;
  /** The machine's process (pid 2 inside), host pid; absent if it ended before it was seen. */
  main?: ProcRef;
  startedAt: string;
}

/** How a sandbox ended. */
export interface ExitStatus {
  /**
   * The exit code. bwrap reports a process killed by signal n as 128 + n (as shells do),
   * and then `signal` names it too; null when bwrap itself was killed.
   */
  code: number | null;
  /** The signal that ended it, when one did (or when `code` > 128 says so). */
  signal: NodeJS.Signals | null;
  /** ISO 8601 time the keeper saw it end. */
  at: string;
}

/** Files in a sandbox's state directory, besides the log segments. */
export const STATE_FILES = {
  exit: 'exit.json',
  keeperLog: 'keeper.log',
  stdout: 'stdout.fifo',
  stderr: 'stderr.fifo',
} as const;

/** The fds bwrap finds its pipes on (0–2 are stdin, stdout, stderr). */
export const FD = { info: 3, usernsBlock: 4, args: 5 } as const;
