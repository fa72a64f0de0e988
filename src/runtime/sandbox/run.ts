/**
 * Machines' processes, isolated: start one in a sandbox (namespaces, overlay root,
 * cgroup, console log), find it again after pier restarts, signal it, stop it, learn how
 * it ended, run a session inside it. The pieces: oci-config.ts turns the spec into runc's
 * configuration, launch.ts walks a keeper (keeper.ts) through the start, and the keeper
 * leaves a record of the sandbox's processes under `runDir` and its exit status in the
 * state directory, which is all that any pier, this one or a later one, needs.
 */
import type { ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdir, readFile, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import type { CgroupSet } from '../../host/cgroups/cgroup.js';
import { run } from './exec.js';
import { handshake, spawnKeeper } from './launch.js';
import { readLogs, type LogPage, type ReadLogsOptions } from './logs.js';
import { assertSandboxId } from './names.js';
import { ociConfig } from './oci-config.js';
import { isRunning, kill, sleep } from './proc.js';
import { STATE_FILES, type ExitStatus, type SandboxRecord, type StartMessage } from './protocol.js';
import { runtimeCommand, type MachineRuntimeName } from './runtimes.js';
import { checkSpec, type SandboxSpec } from './spec.js';
import { ensureTraversable } from './userns.js';

/** What Sandboxes works with. */
export interface SandboxesOptions {
  /** Pier's cgroups; each sandbox's `cgroup` must exist in it before `run`. */
  cgroups: CgroupSet;
  /** Where each sandbox's record (`<id>.json`) lives, by which `find` works after a restart. */
  runDir: string;
  /** The OCI runtime new sandboxes start under (default runc; see runtimes.ts). */
  runtime?: MachineRuntimeName;
  /** The runc binary (default: `runc` on the PATH). */
  runc?: string;
  /** The runsc binary (default: `runsc` on the PATH). */
  runsc?: string;
  /** The static init bound into every sandbox as pid 1 (default: Debian's tini-static). */
  initBinary?: string;
  /** How long `run` waits for the process to be running (default 10 s). */
  startTimeoutMs?: number;
}

/** Options of `stop`. */
export interface StopOptions {
  /** The signal asking the process to end (default SIGTERM). */
  signal?: NodeJS.Signals;
  /** How long to wait for it before SIGKILL for the whole cgroup (default 10 s). */
  timeoutMs?: number;
}

/** The sandboxes of one host. */
/** Where the sandboxes recorded in `runDir` keep runc's state and bundles (on /run). */
export function sandboxRuntimeDir(runDir: string): string {
  const key = createHash('sha256').update(path.resolve(runDir)).digest('hex').slice(0, 16);
  return path.join('/run/pier/sandboxes', key);
}

export class Sandboxes {
  /** Keepers this instance started: their exit wakes `waitExit` at once. */
  private readonly keepers = new Map<string, ChildProcess>();
  /** Records of sandboxes last seen running. */
  private readonly running = new Map<string, SandboxRecord>();
  /** A keeper started ahead, for the next sandbox (`warm`). */
  private spare: ChildProcess | undefined;
  private closed = false;

  /**
   * runc's state (`--root`) and the bundles, on /run: they hold each sandbox's
   * configuration, environment included, which must not reach a disk. One directory per
   * `runDir`, so test beds and replicas on one host keep apart.
   */
  private readonly runtimeDir: string;

  constructor(private readonly opts: SandboxesOptions) {
    this.runtimeDir = sandboxRuntimeDir(opts.runDir);
  }

  /** `runc --root …`: the start of every command of the runtime new sandboxes start under. */
  get runcCommand(): string[] {
    return this.commandOf(this.opts.runtime ?? 'runc');
  }

  /**
   * The start of every command for the sandbox `record` describes: of the runtime it was
   * started under (a machine started before the operator changed runtimes keeps its own).
   */
  commandFor(record: SandboxRecord | undefined): string[] {
    return this.commandOf(record?.runtimeName ?? this.opts.runtime ?? 'runc');
  }

  /** `<binary> --root <its state dir under runtimeDir> <flags>`. */
  private commandOf(runtime: MachineRuntimeName): string[] {
    const binary = runtime === 'runsc' ? this.opts.runsc : this.opts.runc;
    return runtimeCommand(runtime, path.join(this.runtimeDir, runtime), binary);
  }

  /**
   * Starts `spec`'s process in a sandbox and resolves with its host pid once it runs
   * (runc set everything up and the init forked it). It keeps running when pier exits. A process
   * that ends at once still counts as started; `waitExit` tells how it ended. Throws,
   * with the sandbox's last stderr lines, when the sandbox cannot be set up; nothing is
   * left running then.
   */
  async run(spec: SandboxSpec, early?: ChildProcess): Promise<{ pid: number }> {
    try {
      return await this.launch(spec, early);
    } catch (err) {
      // A keeper started ahead that never got its start message leaves on disconnect.
      if (early?.connected) early.disconnect();
      throw err;
    }
  }

  /**
   * Starts a keeper for a sandbox to be run soon (its state directory must exist), to be
   * passed to `run`: its Node startup, the slowest step of a start, then overlaps the
   * host work before it (volume, overlay, network). A keeper never handed to `run`
   * must be disconnected; it then exits.
   */
  startKeeper(stateDir: string): ChildProcess {
    const spare = this.spare;
    this.spare = undefined;
    if (spare?.connected && spare.exitCode === null && spare.signalCode === null) return spare;
    if (spare?.connected) spare.disconnect();
    return spawnKeeper(stateDir);
  }

  /**
   * Starts a keeper ahead for the next sandbox, in the background: a Node process takes
   * tens of milliseconds of CPU to start, better spent while nothing else is starting.
   * It waits for its start message without keeping pier alive, and ends when pier does
   * (its IPC channel closes).
   */
  warm(): void {
    if (this.closed || this.spare?.connected) return;
    const keeper = spawnKeeper();
    keeper.once('error', () => {}); // a failed spare is seen as not connected when taken
    keeper.unref();
    (keeper.channel as { unref?(): void } | undefined)?.unref?.();
    this.spare = keeper;
  }

  /** Lets the keeper kept ready go (running sandboxes keep theirs). */
  close(): void {
    this.closed = true;
    if (this.spare?.connected) this.spare.disconnect();
    this.spare = undefined;
  }

  private async launch(spec: SandboxSpec, early?: ChildProcess): Promise<{ pid: number }> {
    checkSpec(spec);
    if ((await this.find(spec.id)) !== undefined) {
      throw new Error(`sandbox ${spec.id} is already running`);
    }
    await this.waitKeeperGone(spec.id);
    await mkdir(this.opts.runDir, { recursive: true, mode: 0o700 });
    await mkdir(spec.stateDir, { recursive: true, mode: 0o700 });
    const recordFile = this.recordFile(spec.id);
    await rm(recordFile, { force: true });
    await rm(path.join(spec.stateDir, STATE_FILES.exit), { force: true });
    if (!(await stat(spec.rootfs)).isDirectory())
      throw new Error(`${spec.rootfs} is not a directory`);
    for (const m of spec.mounts) await stat(m.source); // a clear ENOENT rather than runc's
    for (const p of [spec.rootfs, ...spec.mounts.map((m) => m.source)]) await ensureTraversable(p);
    const runtime = this.opts.runtime ?? 'runc';
    const command = this.commandOf(runtime);
    const root = command[2] as string;
    await mkdir(root, { recursive: true, mode: 0o700 });
    const start: StartMessage = {
      type: 'start',
      id: spec.id,
      runtime,
      command,
      root,
      bundle: path.join(this.runtimeDir, 'bundles', spec.id),
      config: ociConfig(spec, {
        cgroupsPath: this.opts.cgroups.path(spec.cgroup),
        initBinary: this.opts.initBinary ?? '/usr/bin/tini-static',
        runtime,
      }),
      stateDir: spec.stateDir,
      recordFile,
      cgroup: spec.cgroup,
      logMaxBytes: spec.logMaxBytes,
    };
    const keeper = early ?? spawnKeeper(spec.stateDir);
    const pid = await handshake(keeper, start, this.opts.startTimeoutMs ?? 10_000);
    keeper.unref();
    this.keepers.set(spec.id, keeper);
    keeper.once('exit', () => {
      if (this.keepers.get(spec.id) === keeper) this.keepers.delete(spec.id);
    });
    return { pid };
  }

  /** The host pid of the sandbox's process while it runs; undefined otherwise. */
  async find(id: string): Promise<number | undefined> {
    // A running sandbox's record cannot change (a new run needs this one ended), so while
    // its process lives the record is not read again: one /proc read per look.
    const known = this.running.get(id);
    if (known?.main && (await isRunning(known.main))) return known.main.pid;
    this.running.delete(id);
    const record = await this.record(id);
    if (!record?.main || !(await isRunning(record.main))) return undefined;
    this.running.set(id, record);
    return record.main.pid;
  }

  /** What the sandbox's keeper recorded of its processes, or undefined. */
  async record(id: string): Promise<SandboxRecord | undefined> {
    const text = await readFile(this.recordFile(id), 'utf8').catch(() => undefined);
    return text === undefined ? undefined : (JSON.parse(text) as SandboxRecord);
  }

  /** Sends `signal` to the sandbox's process; false when it is not running. */
  async signal(id: string, signal: NodeJS.Signals): Promise<boolean> {
    const pid = await this.find(id);
    if (pid === undefined) return false;
    const record = this.running.get(id);
    return record ? this.deliver(record, signal) : kill(pid, signal);
  }

  /**
   * `signal` for the sandbox's process. Under runsc that process is the Sentry, whose
   * own signals are not the machine's: `runsc kill` delivers it to the machine's init
   * (tini), which passes it on, as under runc.
   */
  private async deliver(record: SandboxRecord, signal: NodeJS.Signals): Promise<boolean> {
    if (record.runtimeName !== 'runsc') return record.main ? kill(record.main.pid, signal) : false;
    return run([...this.commandFor(record), 'kill', record.id, signal], 10_000).then(
      () => true,
      () => false,
    );
  }

  /** How the sandbox's last run ended, once its keeper recorded it. */
  async exitStatus(id: string): Promise<ExitStatus | undefined> {
    const record = await this.record(id);
    if (!record) return undefined;
    const text = await readFile(path.join(record.stateDir, STATE_FILES.exit), 'utf8').catch(
      () => undefined,
    );
    return text === undefined ? undefined : (JSON.parse(text) as ExitStatus);
  }

  /**
   * Resolves with how the sandbox ended: its recorded status, or, when its keeper is gone
   * without one (killed), `{code: null, signal: null}` once its processes are gone too.
   * Throws for an unknown id, or after `timeoutMs`.
   */
  async waitExit(id: string, timeoutMs = Infinity): Promise<ExitStatus> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const status = await this.exitStatus(id);
      if (status) return status;
      const record = await this.record(id);
      if (!record) throw new Error(`no sandbox ${id}`);
      if (!(await isRunning(record.keeper))) {
        const late = await this.exitStatus(id);
        if (late) return late;
        if (!(await isRunning(record.main)) && !(await isRunning(record.init))) {
          return { code: null, signal: null, at: new Date().toISOString() };
        }
      }
      if (Date.now() >= deadline) throw new Error(`sandbox ${id} still running`);
      await this.pause(id, Math.min(25, Math.max(0, deadline - Date.now())));
    }
  }

  /**
   * Stops the sandbox: `signal` to its process (a frozen cgroup is thawed first so it can
   * act on it), then, if it has not ended within `timeoutMs`, SIGKILL for its pid 1 and
   * every process in its cgroup. Resolves with how it ended; undefined for an unknown id.
   */
  async stop(id: string, opts: StopOptions = {}): Promise<ExitStatus | undefined> {
    const record = await this.record(id);
    if (!record) return undefined;
    const cgroups = this.opts.cgroups;
    if (await cgroups.isFrozen(record.cgroup)) await cgroups.thaw(record.cgroup);
    if (record.main && (await isRunning(record.main)))
      await this.deliver(record, opts.signal ?? 'SIGTERM');
    const ended = await this.waitExit(id, opts.timeoutMs ?? 10_000).catch(() => undefined);
    if (ended) return ended;
    if (await isRunning(record.init)) kill(record.init.pid, 'SIGKILL');
    await this.killCgroup(record.cgroup);
    return this.waitExit(id, 10_000);
  }

  /** The sandbox's console log (see logs.ts); from its state directory. */
  async logs(id: string, opts: ReadLogsOptions = {}): Promise<LogPage> {
    const record = await this.record(id);
    if (!record) throw new Error(`no sandbox ${id}`);
    return readLogs(record.stateDir, opts);
  }

  /** Forgets an ended sandbox (removes its record); its state directory is the caller's. */
  async forget(id: string): Promise<void> {
    if ((await this.find(id)) !== undefined) throw new Error(`sandbox ${id} is running`);
    this.running.delete(id);
    await rm(this.recordFile(id), { force: true });
  }

  /** SIGKILL for every process in the group until it is empty (they may fork meanwhile). */
  private async killCgroup(name: string): Promise<void> {
    const deadline = Date.now() + 5_000;
    for (;;) {
      const pids = await this.opts.cgroups.pids(name);
      if (pids.length === 0 || Date.now() > deadline) return;
      for (const pid of pids) kill(pid, 'SIGKILL');
      await sleep(10);
    }
  }

  /** A previous run's keeper may still be draining the log; the next one must not race it. */
  private async waitKeeperGone(id: string): Promise<void> {
    const record = await this.record(id);
    const deadline = Date.now() + 10_000;
    while (record && (await isRunning(record.keeper))) {
      if (Date.now() > deadline)
        throw new Error(`sandbox ${id}: the previous keeper is still running`);
      await sleep(20);
    }
  }

  /** Waits `ms`, or less when this instance's keeper for `id` exits. */
  private pause(id: string, ms: number): Promise<void> {
    const keeper = this.keepers.get(id);
    return new Promise<void>((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        keeper?.off('exit', done);
        resolve();
      }
      keeper?.once('exit', done);
    });
  }

  private recordFile(id: string): string {
    assertSandboxId(id);
    return path.join(this.opts.runDir, `${id}.json`);
  }
}
