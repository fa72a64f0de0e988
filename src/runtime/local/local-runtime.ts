/**
 * The local runtime: machines on this host, from OCI images (ImageStore), each with an
 * overlay root whose writable layer is a pool volume, a network namespace on the
 * platform bridge, a cgroup, and its process in a sandbox (runc) whose keeper holds its
 * console log. All state that matters is on disk (records.ts, the sandbox's records,
 * the volume), so a new LocalRuntime after a restart of pier carries on (`recover`).
 */
import { getServers as dnsServers } from 'node:dns';
import { mkdir, rmdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { CgroupLimits, CgroupSet } from '../../host/cgroups/cgroup.js';
import type { StoragePool } from '../../storage/pool/pool.js';
import type { ImageConfig, ImageStore } from '../images/index.js';
import {
  MachineStartError,
  type GuestProcess,
  type GuestSession,
  type ShellOptions,
  type LogEntry,
  type MachineRuntime,
  type MachineSpec,
  type MachineStatus,
  type BuildNetwork,
} from '../runtime.js';
import {
  cpuTicks,
  isRunning,
  listensOn,
  mountedType,
  Network,
  readLogs,
  Sandboxes,
  sweepNetworkPolicies,
  sweepWalls,
  unmountRootfs,
  type NetworkOptions,
  type MachineRuntimeName,
} from '../sandbox/index.js';
import { bootMachine, type BootContext } from './boot.js';
import { BuildNetworks } from './build-networks.js';
import { criuSupport, MachineCheckpoints } from './checkpoints.js';
import { guestOf } from './guest.js';
import { startShell } from './shell.js';
import { KeyedLock } from './locks.js';
import { machinePaths } from './prepare.js';
import { stopSignal } from './process.js';
import { assertMachineId, MachineRecords, type MachineRecord } from './records.js';
import { imageRoot, machineLimits, pullImage, volumeName, writableLayer } from './resources.js';
import { MachineWalls, type WallsOptions } from './walls.js';
import { MachineDns } from './machine-dns.js';

export { volumeName } from './resources.js';

/** The log calls the runtime makes (pino's Logger fits). */
export interface RuntimeLog {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

/** Options of {@link LocalRuntime}. */
export interface LocalRuntimeOptions {
  /** State lives under `<dataDir>/machines`. */
  dataDir: string;
  /** Where writable layers (`m-<id>`) live; machines' `volumes` name volumes here too. */
  pool: StoragePool;
  images: ImageStore;
  cgroups: CgroupSet;
  /** The platform bridge and its network; machines get addresses in it. */
  network: NetworkOptions;
  /** What machines may reach beyond their group: private ranges, allowlists' DNS. */
  walls?: WallsOptions;
  log: RuntimeLog;
  /** Cap of each machine's console log on disk (default 4 MiB). */
  logMaxBytes?: number;
  /** Processes and threads a machine may have per vCPU (default 1024). */
  pidsPerVcpu?: number;
  /** The host's copy of the platform CA certificate, bound into every machine (platform-ca.ts). */
  platformCaFile?: string;
  /** The OCI runtime new machine starts use (sandbox/runtimes.ts; default runc). */
  sandboxRuntime?: MachineRuntimeName;
  /**
   * Called once the bridge is made, before any machine joins it: what listens on the
   * gateway for machines (the services listener) binds there now.
   */
  onBridgeUp?: () => Promise<void>;
}

/** How long after a start the namespaces and keeper for the next one are made. */
const WARM_DELAY_MS = 100;

/** Runs machines on this host. See the module comment and README.md. */
export class LocalRuntime implements MachineRuntime {
  private readonly dir: string;
  private readonly records: MachineRecords;
  private readonly sandboxes: Sandboxes;
  private readonly network: Network;
  private readonly locks = new KeyedLock();
  private readonly checkpoints: MachineCheckpoints;
  private readonly walls: MachineWalls;
  private readonly builds: BuildNetworks;
  private bridge: Promise<void> | undefined;
  /** The machines' resolver, once the bridge stands. */
  private dns: MachineDns | undefined;
  /** The resolv.conf bound into every machine: it names the resolver, once it runs. */
  private readonly resolvConf: string;

  constructor(private readonly opts: LocalRuntimeOptions) {
    this.dir = path.join(path.resolve(opts.dataDir), 'machines');
    this.resolvConf = path.join(this.dir, '.run', 'resolv.conf');
    this.records = new MachineRecords(this.dir);
    // Ids never start with a dot, so `.run` cannot clash with a machine's files.
    this.sandboxes = new Sandboxes({
      cgroups: opts.cgroups,
      runDir: path.join(this.dir, '.run'),
      ...(opts.sandboxRuntime ? { runtime: opts.sandboxRuntime } : {}),
    });
    this.network = new Network(opts.network);
    this.walls = new MachineWalls(opts.network, this.records, opts.walls ?? {}, opts.log);
    this.builds = new BuildNetworks({
      network: this.network,
      records: this.records,
      walls: this.walls,
      ensureBridge: () => this.ensureBridge(),
      resolver: () => (this.dns ? this.network.gateway : undefined),
      log: opts.log,
    });
    this.checkpoints = new MachineCheckpoints({
      pool: opts.pool,
      records: this.records,
      cgroups: opts.cgroups,
      isRunning: async (id) => (await this.sandboxes.find(id)) !== undefined,
      log: opts.log,
    });
  }

  async create(spec: MachineSpec, opts: { signal?: AbortSignal } = {}) {
    assertMachineId(spec.id);
    return this.locks.with(spec.id, async () => {
      const image = await pullImage(this.opts.images, spec.image, opts.signal);
      // The writable layer is made while the start goes on (the walls, the keeper): the
      // record names it where the pool keeps every volume, `<root>/<name>`.
      const volume = {
        name: volumeName(spec.id),
        path: path.join(this.opts.pool.root, volumeName(spec.id)),
      };
      let layerFailed = false;
      const layer = writableLayer(this.opts.pool, spec).then(
        (made) => {
          if (made.path !== volume.path)
            throw new Error(`the pool put volume ${made.name} at ${made.path}, not ${volume.path}`);
        },
        (err: unknown) => {
          layerFailed = true;
          throw err;
        },
      );
      layer.catch(() => {}); // awaited by the start; an allocation failing first ignores it
      let fresh = false;
      const record = await this.records
        .allocate(spec.id, this.network.cidr, (ip, previous) => {
          fresh = !previous;
          return {
            id: spec.id,
            ip,
            volume: volume.name,
            volumePath: volume.path,
            image: { ref: image.ref, digest: image.digest, config: image.config },
            limits: this.limits(spec),
            network: spec.network,
            stop: this.stopOf(spec, image.config),
            createdAt: previous?.createdAt ?? new Date().toISOString(),
          };
        })
        .catch(async (err: Error) => {
          await layer.catch(() => {});
          throw /no free address/.test(err.message)
            ? new MachineStartError('no-capacity', `no address left on ${this.network.cidr}`)
            : err;
        });
      // A retried create may come with another image: the overlay is mounted anew.
      if ((await this.sandboxes.find(spec.id)) === undefined) await this.unmount(record);
      const { bootMs } = await this.boot(spec, record, opts.signal, layer).catch(async (err) => {
        // No writable layer (no room): nothing of the machine holds an address either.
        if (layerFailed && fresh) await this.forgetRecord(spec.id);
        throw err;
      });
      this.opts.log.info({ machine: spec.id, ip: record.ip, bootMs }, 'machine created');
      return { bootMs, privateIp: record.ip };
    });
  }

  async start(spec: MachineSpec): Promise<{ bootMs: number }> {
    assertMachineId(spec.id);
    return this.locks.with(spec.id, async () => {
      if (await this.records.get(spec.id)) await this.checkpoints.tidy(spec.id);
      const record = await this.records.get(spec.id);
      if (!record)
        throw new MachineStartError(
          'create-failed',
          `machine ${spec.id} does not exist on this host`,
        );
      const updated = {
        ...record,
        limits: this.limits(spec),
        network: spec.network,
        stop: this.stopOf(spec, record.image.config),
      };
      await this.records.put(updated);
      return this.boot(spec, updated);
    });
  }

  async stop(spec: MachineSpec): Promise<void> {
    assertMachineId(spec.id);
    await this.locks.with(spec.id, async () => {
      const record = await this.records.get(spec.id);
      if (!record) return;
      const updated = { ...record, stop: this.stopOf(spec, record.image.config) };
      await this.records.put(updated);
      await this.halt(updated);
    });
  }

  async suspend(id: string): Promise<void> {
    assertMachineId(id);
    await this.locks.with(id, async () => {
      if ((await this.sandboxes.find(id)) === undefined)
        throw new Error(`machine ${id} is not running`);
      if (!(await this.opts.cgroups.isFrozen(id))) await this.opts.cgroups.freeze(id);
    });
  }

  async resume(id: string): Promise<void> {
    assertMachineId(id);
    await this.locks.with(id, async () => {
      if (await this.opts.cgroups.isFrozen(id)) await this.opts.cgroups.thaw(id);
    });
  }

  async destroy(id: string): Promise<void> {
    assertMachineId(id);
    await this.locks.with(id, async () => {
      const record = await this.records.get(id);
      // Without a record (a create that died early) the names are still known from the id.
      const stop = record?.stop ?? { signal: 'SIGTERM' as const, timeoutMs: 10_000 };
      await this.sandboxes.stop(id, stop);
      await this.sandboxes.forget(id);
      const root = machinePaths(this.dir, id, '/').root;
      await unmountRootfs(root);
      await rmdir(root).catch((err: NodeJS.ErrnoException) => {
        if (err.code !== 'ENOENT') throw err;
      });
      await this.network.removeNetns(id);
      if (!(await this.removeCgroup(id)))
        throw new Error(`the cgroup of machine ${id} still has processes`);
      await this.opts.pool.destroy(record?.volume ?? volumeName(id));
      await this.checkpoints.removeAll(id);
      await this.records.remove(id);
      // A stale entry only names an address no machine has; the next sync drops it.
      await this.walls
        .sync()
        .catch((err: Error) =>
          this.opts.log.warn({ machine: id, err: err.message }, 'walls not updated after destroy'),
        );
      this.opts.log.info({ machine: id }, 'machine destroyed');
    });
  }

  async status(id: string): Promise<MachineStatus> {
    assertMachineId(id);
    const record = await this.records.get(id);
    if (!record) return { state: 'missing' };
    const ip = { privateIp: record.ip };
    if ((await this.sandboxes.find(id)) !== undefined) {
      const frozen = await this.opts.cgroups.isFrozen(id);
      return { state: frozen ? 'suspended' : 'running', ...ip };
    }
    // Its keeper writes how it ended a moment after the process is gone (it drains the
    // console pipes first): wait for that rather than report an end without its code.
    const exit =
      (await this.sandboxes.exitStatus(id)) ??
      (await this.sandboxes.waitExit(id, 5_000).catch(() => undefined));
    return { state: 'stopped', ...ip, ...(exit ? { exit } : {}) };
  }

  async logs(id: string, opts: { after?: number; limit: number }) {
    assertMachineId(id);
    const record = await this.records.get(id);
    if (!record) return { entries: [], cursor: opts.after ?? 0, truncated: false };
    const state = machinePaths(this.dir, id, record.volumePath).state;
    const page = await readLogs(
      state,
      opts.after === undefined
        ? { tail: opts.limit, limit: opts.limit }
        : { after: opts.after, limit: opts.limit },
    );
    const entries: LogEntry[] = page.entries.map((e) => ({
      seq: e.seq,
      at: e.at,
      stream: e.stream,
      text: e.text,
    }));
    return { entries, cursor: page.cursor, truncated: page.truncated };
  }

  async recover(): Promise<string[]> {
    // No build outlives pier: what builds of its last run held is taken back.
    await this.builds.sweep();
    const found: string[] = [];
    for (const record of await this.records.all()) {
      if ((await this.sandboxes.find(record.id)) === undefined) continue;
      await this.locks.with(record.id, async () => {
        await this.ensureBridge();
        await this.network.createNetns(record.id, record.ip);
        await this.opts.cgroups.create(record.id);
        // A live machine whose overlay is gone from the host's mount table keeps its own
        // copy; mounting its upper layer a second time would corrupt it, so only warn.
        const root = machinePaths(this.dir, record.id, record.volumePath).root;
        if ((await mountedType(root)) !== 'overlay') {
          this.opts.log.warn(
            { machine: record.id, root },
            'running machine has no overlay mounted on the host',
          );
        }
      });
      found.push(record.id);
    }
    this.opts.log.info({ machines: found.length }, 'machines recovered');
    return found;
  }

  buildNetwork(buildId: string): Promise<BuildNetwork> {
    return this.builds.lend(buildId);
  }

  async cpuTime(id: string): Promise<number | undefined> {
    assertMachineId(id);
    const pids = await this.opts.cgroups.pids(id).catch(() => []);
    if (pids.length === 0) return undefined;
    let ticks = 0;
    for (const pid of pids) ticks += await cpuTicks(pid);
    return ticks * 10;
  }

  async guest(id: string): Promise<GuestProcess | undefined> {
    assertMachineId(id);
    const record = await this.records.get(id);
    return record && guestOf(record, await this.sandboxes.record(id));
  }

  async shell(id: string, opts: ShellOptions): Promise<GuestSession> {
    const guest = await this.guest(id);
    if (!guest) throw new Error(`machine ${id} is not running`);
    const command = this.sandboxes.commandFor(await this.sandboxes.record(id));
    return startShell(command, id, guest, opts);
  }

  async listening(id: string, port: number) {
    assertMachineId(id);
    const [record, sandbox] = await Promise.all([this.records.get(id), this.sandboxes.record(id)]);
    // Under gVisor the host kernel holds none of the machine's sockets: the caller connects.
    if (!record || !sandbox || sandbox.runtimeName === 'runsc' || !(await isRunning(sandbox.init)))
      return undefined;
    return listensOn(sandbox.init.pid, record.ip, port);
  }

  async address(id: string, port: number): Promise<{ host: string; port: number } | undefined> {
    const ip = await this.records.ip(id);
    return ip === undefined ? undefined : { host: ip, port };
  }

  async checkpoint(id: string, key: string): Promise<{ sizeBytes: number | null }> {
    assertMachineId(id);
    return this.locks.with(id, () => this.checkpoints.take(id, key));
  }

  async restoreCheckpoint(id: string, key: string): Promise<void> {
    assertMachineId(id);
    await this.locks.with(id, () => this.checkpoints.restore(id, key));
  }

  async deleteCheckpoint(id: string, key: string): Promise<void> {
    assertMachineId(id);
    await this.locks.with(id, () => this.checkpoints.remove(id, key));
  }

  memoryCheckpoints(): Promise<{ supported: boolean; reason: string }> {
    return criuSupport();
  }

  /**
   * Removes what a create made of a machine that never got a writable layer: its record,
   * its place in the walls, and the network and cgroup made meanwhile.
   */
  private async forgetRecord(id: string): Promise<void> {
    await this.network.removeNetns(id);
    await this.removeCgroup(id);
    await this.records.remove(id);
    await this.walls
      .sync()
      .catch((err: Error) =>
        this.opts.log.warn({ machine: id, err: err.message }, 'walls not updated'),
      );
  }

  /**
   * Starts the machine of `record`; `volumeReady` resolves once its writable layer exists
   * (a create makes it meanwhile).
   */
  private boot(
    spec: MachineSpec,
    record: MachineRecord,
    signal?: AbortSignal,
    volumeReady?: Promise<void>,
  ) {
    // The walls hold the machine's record before its network joins the bridge: it is
    // never on the bridge without them. Their rewrite overlaps the rest of the start.
    const bridgeReady = this.ensureBridge().then(() => this.walls.sync());
    bridgeReady.catch(() => {}); // awaited by the network step; a start failing earlier ignores it
    const ctx: BootContext = {
      machinesDir: this.dir,
      pool: this.opts.pool,
      cgroups: this.opts.cgroups,
      network: this.network,
      imageRoot: (r) => imageRoot(this.opts.images, r),
      logMaxBytes: this.opts.logMaxBytes ?? 4 * 1024 * 1024,
      ...(this.opts.platformCaFile ? { platformCaFile: this.opts.platformCaFile } : {}),
      // Written by startDns before the machine joins the bridge (bridgeReady).
      resolvConfFile: this.resolvConf,
      bridgeReady,
      ...(volumeReady ? { volumeReady } : {}),
      sandboxes: this.sandboxes,
      halt: (r) => this.halt(r),
    };
    // What the next start can use is made once this one is over and answered: making
    // it spawns from pier itself, which would hold up the answer.
    return bootMachine(ctx, spec, record, signal).finally(() => {
      setTimeout(() => {
        this.network.warm();
        this.sandboxes.warm();
      }, WARM_DELAY_MS).unref();
    });
  }

  /** Stops the process (signal, then SIGKILL) and unmounts the root; the volume stays. */
  private async halt(record: MachineRecord): Promise<void> {
    await this.sandboxes.stop(record.id, record.stop);
    await this.unmount(record);
  }

  private async unmount(record: MachineRecord): Promise<void> {
    const root = machinePaths(this.dir, record.id, record.volumePath).root;
    await unmountRootfs(root).catch((err: Error) =>
      this.opts.log.warn({ machine: record.id, err: err.message }, 'cannot unmount machine root'),
    );
  }

  private limits(spec: MachineSpec): CgroupLimits {
    const { limits, missing } = machineLimits(
      this.opts.cgroups,
      spec,
      this.opts.pidsPerVcpu ?? 1024,
    );
    if (missing.length)
      this.opts.log.warn({ machine: spec.id, missing }, 'cgroup limits not enforced here');
    return limits;
  }

  private stopOf(spec: MachineSpec, config: ImageConfig): MachineRecord['stop'] {
    return { signal: stopSignal(spec, config), timeoutMs: spec.killTimeoutS * 1000 };
  }

  /**
   * Makes the bridge and, once per runtime, its walls from the records (replacing what a
   * previous run left) and removes the walls of bridges that are gone.
   */
  private ensureBridge(): Promise<void> {
    this.bridge ??= (async () => {
      await this.network.ensureBridge();
      await this.startDns();
      await this.opts
        .onBridgeUp?.()
        .catch((err: Error) =>
          this.opts.log.warn({ err: err.message }, 'a listener for machines did not bind'),
        );
      const swept = await sweepWalls();
      if (swept.length) this.opts.log.info({ bridges: swept }, 'walls of removed bridges swept');
      const policies = await sweepNetworkPolicies();
      if (policies.length)
        this.opts.log.info({ veths: policies }, 'policies of gone machines swept');
      await this.walls.sync();
    })().catch((err: unknown) => {
      this.bridge = undefined;
      throw err;
    });
    return this.bridge;
  }

  /**
   * Starts the machines' resolver on the gateway (machine-dns.ts) and writes the
   * resolv.conf every machine gets. When port 53 of the gateway is taken (another DNS
   * server on all addresses), machines go without a resolver, as before it existed, and
   * the walls keep port 53 closed to them.
   */
  private async startDns(): Promise<void> {
    if (this.dns) return;
    const gateway = this.network.gateway;
    await mkdir(path.dirname(this.resolvConf), { recursive: true });
    try {
      const server = await MachineDns.start({
        host: gateway,
        upstream: this.opts.walls?.dnsServers ?? dnsServers(),
        policyOf: (ip) => this.walls.dnsPolicy(ip),
        log: this.opts.log,
      });
      await writeFile(this.resolvConf, `nameserver ${gateway}\n`, { mode: 0o644 });
      this.dns = server;
      this.walls.useResolver(gateway);
    } catch (err) {
      // Without a nameserver line a client fails at once instead of waiting on the walls.
      await writeFile(this.resolvConf, '# no resolver: port 53 of the gateway is taken\n');
      this.opts.log.warn(
        { gateway, err: (err as Error).message },
        'machines get no resolver: port 53 of the gateway is taken',
      );
    }
  }

  /** Stops the machines' resolver and the refresh of allowed names; machines keep running. */
  async close(): Promise<void> {
    this.walls.close();
    this.network.close();
    this.sandboxes.close();
    await this.dns?.close();
    this.dns = undefined;
  }

  /** Removes the machine's cgroup, waiting briefly for exited processes to be reaped. */
  private async removeCgroup(id: string): Promise<boolean> {
    for (let i = 0; i < 50; i++) {
      if (await this.opts.cgroups.remove(id)) return true;
      await new Promise((r) => setTimeout(r, 20));
    }
    return false;
  }
}
