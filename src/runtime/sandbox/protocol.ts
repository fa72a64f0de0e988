/**
 * What pier and a sandbox's keeper say to each other while it starts (over the Node IPC
 * channel, which closes once the sandbox runs), and what they leave on disk for each
 * other: the record (who the sandbox's processes are) and the exit status.
 */
import type { OciConfig } from './oci-config.js';
import type { ProcRef } from './proc.js';
import type { MachineRuntimeName } from './runtimes.js';

/** pier → keeper: everything needed to start. Holds the environment, so never on disk. */
export interface StartMessage {
  type: 'start';
  id: string;
  /** The OCI runtime (runtimes.ts). */
  runtime: MachineRuntimeName;
  /** The start of its every command: binary, `--root <dir>`, global flags. */
  command: string[];
  /** Its state directory (`--root`). */
  root: string;
  /** The bundle directory; the keeper writes `config` there and removes it when the sandbox ends. */
  bundle: string;
  config: OciConfig;
  stateDir: string;
  /** Where the keeper writes the SandboxRecord. */
  recordFile: string;
  cgroup: string;
  logMaxBytes: number;
}

export type PierMessage = StartMessage;

/** keeper → pier. */
export type KeeperMessage =
  /** The machine's process runs (or already ended, when `pid` is the init). */
  { type: 'started'; pid: number } | { type: 'failed'; message: string };

/** Who a running sandbox's processes are; written by its keeper, read by any pier. */
export interface SandboxRecord {
  id: string;
  stateDir: string;
  cgroup: string;
  /** The keeper: the parent of runc, holder of the log pipes. */
  keeper: ProcRef;
  /** `runc run` (or `runsc run`), which waits for the sandbox and relays its output, in the host's pid namespace. */
  runtime: ProcRef;
  /** Which OCI runtime runs it; absent in records written before the choice existed: runc. */
  runtimeName?: MachineRuntimeName;
  /**
   * The sandbox's pid 1 (its init), host pid. Under runsc, whose machine processes are not
   * host processes, the sandbox process (gVisor's Sentry) that runs them.
   */
  init: ProcRef;
  /**
   * The machine's process (the init's child), host pid; absent if it ended before it was
   * seen. Under runsc the Sentry, as `init`: the machine lives exactly as long as it does.
   */
  main?: ProcRef;
  startedAt: string;
}

/** How a sandbox ended. */
export interface ExitStatus {
  /**
   * The exit code. The init reports a process killed by signal n as 128 + n (as shells
   * do), and then `signal` names it too; null when runc itself was killed.
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
