/**
 * The contract between the machines service (rows, states, jobs, the API) and a runtime
 * that runs machines on a host: `MachineRuntime`. The local runtime (runtime/local) runs
 * them on this host from OCI images with runc, network namespaces, an overlay root
 * on a pool volume and cgroups; a fleet of host agents or Kubernetes would be other
 * implementations. The runtime knows nothing of organizations, apps or the job table.
 *
 * Every method is idempotent: a job that dies halfway runs the same call again.
 */

/** What a machine is made from, resolved by the service from its config (spec 2.12). */
export interface MachineSpec {
  /** `mch-…`; names its volume, cgroup, netns and state. */
  id: string;
  /** OCI reference. */
  image: string;
  vcpus: number;
  memoryMb: number;
  /** Size of the writable layer (a pool volume of this size). */
  diskMb: number;
  /** Environment: the app's secrets (plain), then `env`, laid over the image's Env. */
  env: Record<string, string>;
  /** `start`: run as `/bin/sh -c start`, replacing the image's Entrypoint and Cmd. */
  start?: string;
  /** `command`: the argv of a one-off machine, replacing Cmd (Entrypoint kept). */
  command?: string[];
  internalPort: number;
  /** `port`: running once internalPort accepts a TCP connection (or the health check passes); `boot`: once started. */
  readiness: 'port' | 'boot';
  healthCheck?: {
    path?: string;
    timeoutMs: number;
    intervalMs: number;
    healthyThreshold: number;
    maxWaitMs: number;
  };
  /** Signal of stop; default the image's STOPSIGNAL, else SIGTERM. */
  killSignal?: string;
  /** Seconds from the signal to SIGKILL. */
  killTimeoutS: number;
  /** Volumes of the pool bound into the machine. */
  volumes: { volume: string; mountPath: string }[];
  hostname: string;
  /** What the machine may reach on the network (docs/architecture.md, "Isolation model"). */
  network: MachineNetwork;
}

/**
 * A machine's place behind the walls. The runtime knows no organizations: the service
 * names the group (the organization), and machines reach each other only within one.
 */
export interface MachineNetwork {
  /** Machines of one group reach each other by private address; nothing crosses groups. */
  group: string;
  /**
   * What it reaches beyond the host (spec 2.12 `egress`): absent, the internet; `deny-all`,
   * nothing; `allowlist`, only these IPv4 CIDRs and the current addresses of these names.
   */
  egress?: { mode: 'deny-all' | 'allowlist'; domains: string[]; cidrs: string[] };
  /**
   * TCP ports on the host it may connect to, such as the fronts of the databases attached
   * to its app; every other port of the host is closed to it.
   */
  hostPorts?: number[];
}

/** A machine as the host sees it now. */
export interface MachineStatus {
  state: 'running' | 'suspended' | 'stopped' | 'missing';
  privateIp?: string;
  /** Set once the process has ended: its exit code (128+n for signal n). */
  exit?: { code: number | null; signal: string | null; at: string };
}

/**
 * A running machine's process as the host reaches it, for its files and shell sessions:
 * the sandbox's init (its root and namespaces are the machine's), and the credentials,
 * working directory and environment of the machine's main process.
 */
export interface GuestProcess {
  /** Host pid of the sandbox's pid 1. */
  initPid: number;
  /** Host pid of the machine's main process (pid 2 inside). */
  mainPid: number;
  /** The main process's uid and gid as the machine sees them (not the host's). */
  uid: number;
  gid: number;
  cwd: string;
  env: Record<string, string>;
  /** The machine's cgroup, which sessions join so its limits and freezing apply to them. */
  cgroup: string;
  /**
   * False when the machine's files cannot be reached through `/proc/<initPid>/root`: under
   * gVisor (runsc) that pid is the Sentry, whose root is an empty chroot of its own (with
   * its own /proc), and the machine's files are served by its gofer; the files API must
   * then refuse rather than open that root as host root.
   */
  filesReachable?: boolean;
  /**
   * True when the machine's sockets and packets belong to a network stack of its own
   * (gVisor's netstack under runsc): its network namespace's socket tables and packet
   * filters on the host kernel see none of them.
   */
  ownNetworkStack?: boolean;
}

/** What a shell session runs (spec 4.9 exec). */
export interface ShellOptions {
  /** The command; absent: an interactive `/bin/sh`. */
  argv?: string[];
  /** A pseudo-terminal (stdout and stderr merged), or plain pipes. */
  tty: boolean;
  cols: number;
  rows: number;
}

/** A process running inside a machine, with its input and output. */
export interface GuestSession {
  /** Host pid of the session's process (outside the machine). */
  pid: number;
  write(data: Buffer): void;
  /** Closes its stdin (without a tty; with one, send ^D). */
  end(): void;
  resize(cols: number, rows: number): void;
  kill(signal?: NodeJS.Signals): void;
  onData(listener: (stream: 'stdout' | 'stderr', data: Buffer) => void): void;
  /** Once: its exit code, or the signal that ended it. */
  onExit(listener: (code: number | null, signal: NodeJS.Signals | null) => void): void;
}

/** One console line of a machine. */
export interface LogEntry {
  /** Its position in the machine's log: a cursor that ends just after it. */
  seq: number;
  at: string;
  stream: 'stdout' | 'stderr';
  text: string;
}

/**
 * Why a start failed, as spec 7.3 names it: the image (create-failed), the process
 * ending during start (guest-exited), its port never answering (port-timeout), no room
 * (no-capacity). `bootLog` is the console output of the failed start.
 */
export class MachineStartError extends Error {
  constructor(
    readonly code: 'create-failed' | 'guest-exited' | 'port-timeout' | 'no-capacity',
    message: string,
    readonly bootLog = '',
  ) {
    super(message);
    this.name = 'MachineStartError';
  }
}

export interface MachineRuntime {
  /**
   * Makes the machine (image pulled and unpacked, writable layer, network, cgroup) and
   * starts it; resolves when it is ready by its readiness rule, with how long the boot took.
   */
  create(
    spec: MachineSpec,
    opts?: { signal?: AbortSignal },
  ): Promise<{ bootMs: number; privateIp: string }>;
  /** Starts a stopped machine (its writable layer kept); resolves when ready. */
  start(spec: MachineSpec): Promise<{ bootMs: number }>;
  /** killSignal, then SIGKILL after killTimeoutS; the writable layer stays. */
  stop(spec: MachineSpec): Promise<void>;
  /** Freezes the machine's cgroup (memory kept). */
  suspend(id: string): Promise<void>;
  /** Thaws it; resolves when its processes run again. */
  resume(id: string): Promise<void>;
  /** Stops it if running and removes everything it had on the host. */
  destroy(id: string): Promise<void>;
  status(id: string): Promise<MachineStatus>;
  /** Console output after `cursor` (absent: the last `limit` lines). */
  logs(
    id: string,
    opts: { after?: number; limit: number },
  ): Promise<{ entries: LogEntry[]; cursor: number; truncated: boolean }>;
  /** Takes back machines that outlived a restart of pier; returns the ids it found running. */
  recover(): Promise<string[]>;
  /** CPU time the machine's processes have used so far (ms), undefined when it does not run. */
  cpuTime(id: string): Promise<number | undefined>;
  /** The running (or suspended) machine's process; undefined when it does not run. */
  guest(id: string): Promise<GuestProcess | undefined>;
  /**
   * Starts a process inside the running machine: in all its namespaces, under its root,
   * as its user, in its cgroup. Throws when the machine does not run.
   */
  shell(id: string, opts: ShellOptions): Promise<GuestSession>;
  /**
   * Whether the running machine listens on TCP `port` for connections to its address,
   * found without connecting (a connection would count against its network policy);
   * undefined when the runtime cannot tell that way (then the caller connects).
   */
  listening?(
    id: string,
    port: number,
  ): Promise<{ listening: true } | { listening: false; reason: string } | undefined>;
  /** Host address and port to reach the machine's `port` (for the proxy). */
  address(id: string, port: number): Promise<{ host: string; port: number } | undefined>;
  /**
   * Takes disk checkpoint `key` (lowercase letters and digits) of the machine's writable
   * layer: a running machine is frozen for the instant, so the copy is what a power cut
   * would have left. A checkpoint that exists already is kept (a rerun).
   */
  checkpoint(id: string, key: string): Promise<{ sizeBytes: number | null }>;
  /**
   * Replaces the writable layer of a stopped machine with a copy of checkpoint `key`
   * (which stays); the console log is kept. A crash leaves the old disk or the new one.
   */
  restoreCheckpoint(id: string, key: string): Promise<void>;
  /** Removes checkpoint `key` of the machine; idempotent. */
  deleteCheckpoint(id: string, key: string): Promise<void>;
  /** Whether checkpoints with memory can be taken on this host, and if not, why. */
  memoryCheckpoints(): Promise<{ supported: boolean; reason: string }>;
  /**
   * Lends build `buildId` a network for its RUN steps: a namespace on the machines'
   * network, behind their walls as a machine of a group of its own (no machine, no port
   * of the host, the internet as an app's machine has it by default). Its `release` takes
   * it back; one a crash of pier left is taken back at the next start (`recover`).
   */
  buildNetwork?(buildId: string): Promise<BuildNetwork>;
  /**
   * Stops what the runtime serves beside its machines (their resolver, timers); the
   * machines themselves keep running, as they do across a restart of pier.
   */
  close?(): Promise<void>;
}

/** A network lent to one build (MachineRuntime.buildNetwork). */
export interface BuildNetwork {
  /** The network namespace's file, for `buildah --network ns:<path>`. */
  netnsPath: string;
  /** Its address on the machines' network. */
  ip: string;
  /** The machines' resolver (the gateway), absent when the host gives machines none. */
  dns?: string;
  /** Removes the namespace and takes the address back (idempotent). */
  release(): Promise<void>;
}
