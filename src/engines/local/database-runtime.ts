/**
 * The local `DatabaseRuntime`: managed databases on this host. It holds the engines, the
 * TCP fronts that customers connect to, the cgroups that freeze idle servers, the sleep
 * policy's clock and the failover watchdog of redundant databases. The databases service
 * decides what should exist (rows and jobs); this class makes the host match and keeps
 * it matching. It writes no rows: what it observes goes back through its events.
 *
 * Servers outlive `pier serve`: they run in their own sessions. Fronts live in this
 * process, so on start every database's front is opened again on its port and every
 * server is found (or started) and taken back.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import type { Logger } from 'pino';
import type { Config } from '../../config.js';
import { platformCa } from '../../crypto/ca.js';
import type { PoolHandle } from '../../storage/pool-handle.js';
import { ServerIdentities } from '../../host/server-identities.js';
import { handOverTree } from '../../host/tree-owner.js';
import {
  EngineError,
  type ArchiveRef,
  type DatabaseEngine,
  type EngineEnv,
  type InstanceSpec,
  type ReplicatingEngine,
} from '../engine.js';
import { frontClientPolicy, type AdmitPeer } from '../front/client-policy.js';
import { TcpFront } from '../front/tcp-front.js';
import { PostgresEngine } from '../postgres/index.js';
import { RedisEngine } from '../redis/index.js';
import type {
  DatabaseKind,
  DatabaseRuntime,
  DatabaseRuntimeEvents,
  InstanceRef,
  Power,
  ServeState,
  SuspendPolicy,
} from '../runtime.js';
import { CgroupSet } from '../../host/cgroups/cgroup.js';
import {
  candidatePorts,
  freeLoopbackPort,
  parsePortRange,
  type PortRange,
} from '../../host/ports.js';
import { sleepAction } from '../../host/sleep-policy.js';
import { failover, isAlive, loseStandby, type RedundancyDeps } from './failover.js';
import { lastActivity, type LiveDatabase } from './live.js';

export type { LiveDatabase } from './live.js';

export interface LocalDatabaseRuntimeOptions {
  config: Config;
  pool: PoolHandle;
  log: Logger;
  /** Where sleep, wake and failover are reported (the service writes the rows). */
  events: DatabaseRuntimeEvents;
  /** How often the sleep policy and the failover watchdog look (default 1 s / 250 ms). */
  sleepTickMs?: number;
  watchdogTickMs?: number;
}

export class LocalDatabaseRuntime implements DatabaseRuntime {
  readonly hostId = 'local';
  private readonly live = new Map<string, LiveDatabase>();
  private readonly engines: Record<DatabaseKind, DatabaseEngine>;
  private readonly range: PortRange;
  /** Who a front serves: the host and the machines' network (or all, when made public). */
  private readonly admitPeer: AdmitPeer;
  private envPromise: Promise<EngineEnv> | undefined;
  /** One OS user per database (docs/architecture.md, "Identities"). */
  readonly identities: ServerIdentities;
  private cgroups: Promise<CgroupSet | undefined> | undefined;
  private freezerKnown: CgroupSet | undefined | null = null;
  private timers: NodeJS.Timeout[] = [];
  private stopped = false;

  constructor(private readonly opts: LocalDatabaseRuntimeOptions) {
    this.engines = { postgres: new PostgresEngine(), redis: new RedisEngine() };
    this.range = parsePortRange(opts.config.databasePorts);
    this.admitPeer = frontClientPolicy({
      machinesCidr: opts.config.machinesCidr,
      public: opts.config.publicDatabaseFronts,
    });
    this.identities = new ServerIdentities(opts.config.databaseUserPrefix);
  }

  private engine(kind: DatabaseKind): DatabaseEngine {
    return this.engines[kind];
  }

  private replicating(kind: DatabaseKind): ReplicatingEngine {
    const engine = this.engines[kind] as Partial<ReplicatingEngine>;
    if (typeof engine.createStandby !== 'function' || typeof engine.promote !== 'function') {
      throw new EngineError('unsupported', `${kind} databases cannot have a standby`);
    }
    return engine as ReplicatingEngine;
  }

  /**
   * What engines need, made on first use: the pool, TLS files, and as `user` the identity
   * of templates, which calls about no one database (archives, destroys) run with. Calls
   * about an instance take {@link envFor} instead.
   */
  env(): Promise<EngineEnv> {
    this.envPromise ??= (async () => {
      const { config, log } = this.opts;
      const { pool } = await this.opts.pool.get();
      const user = await this.identities.of(TEMPLATES_IDENTITY);
      // Names the public host and the services host, which machines dial.
      const tls = await platformCa(config);
      return {
        pool,
        user,
        templateUser: user,
        stateDir: path.join(config.dataDir, 'engines'),
        tls: { certFile: tls.certFile, keyFile: tls.keyFile, caFile: tls.caFile },
        log,
      };
    })().catch((err: unknown) => {
      this.envPromise = undefined;
      throw err;
    });
    return this.envPromise;
  }

  /** The env of calls about `inst`: its server runs as its database's own identity. */
  async envFor(inst: InstanceSpec): Promise<EngineEnv> {
    const env = await this.env();
    return { ...env, user: await this.identities.of(inst.owner ?? inst.id) };
  }

  /**
   * Removes the identity of a deleted database, after its servers are destroyed. Archives
   * it wrote that are still kept (a copy reads them) go to root first, so a later identity
   * that gets the same uid cannot read them.
   */
  async releaseIdentity(databaseId: string, archiveIds: string[]): Promise<void> {
    const env = await this.env();
    for (const id of archiveIds) {
      const info = await env.pool.info(id);
      if (info) await handOverTree(info.path, { uid: 0, gid: 0 });
    }
    await this.identities.remove(databaseId);
  }

  /** The cgroup freezer, when this host has one (root, cgroup v1 or v2); found once. */
  private freezer(): Promise<CgroupSet | undefined> {
    this.cgroups ??= CgroupSet.detect({}, (reason) =>
      this.opts.log.warn({ reason }, 'no cgroup freezer: idle databases stop instead'),
    ).then((set) => (this.freezerKnown = set));
    return this.cgroups;
  }

  /** Whether idle databases can be frozen (known once the freezer was looked for). */
  get canFreeze(): boolean {
    return this.freezerKnown !== null && this.freezerKnown !== undefined;
  }

  /** Whether an instance's cgroup is frozen now (reports and tests). */
  async isFrozen(instanceId: string): Promise<boolean> {
    const cg = await this.freezer();
    return cg ? cg.isFrozen(instanceId).catch(() => false) : false;
  }

  async capacity(): Promise<{ freeBytes: number; totalBytes: number }> {
    const { pool } = await this.env();
    const { freeBytes, totalBytes } = await pool.usage();
    return { freeBytes, totalBytes };
  }

  internalPort(): Promise<number> {
    return freeLoopbackPort();
  }

  async caCertificate(): Promise<string> {
    return readFile((await this.env()).tls.caFile, 'utf8');
  }

  async openFront(databaseId: string, kind: DatabaseKind, port?: number) {
    const existing = this.live.get(databaseId);
    if (existing) return existing.front.port;
    const live: LiveDatabase = {
      id: databaseId,
      kind,
      front: undefined as unknown as TcpFront,
      ready: false,
      power: 'running',
      policy: null,
      memoryMb: 0,
      busy: 0,
      lastBusyAt: Date.now(),
      queue: Promise.resolve(),
    };
    const taken = new Set([...this.live.values()].map((l) => l.front.port));
    const ports = port !== undefined ? [port] : candidatePorts(this.range, taken);
    for (const candidate of ports) {
      const front = new TcpFront({
        host: '0.0.0.0',
        port: candidate,
        // Until the database is served, beforeConnect refuses: this target is never dialed.
        targetPort: 1,
        beforeConnect: () => this.beforeConnect(live),
        beforeTraffic: () => (live.power === 'running' ? undefined : this.wakeForClient(live)),
        onError: (err, phase) =>
          this.opts.log.debug({ err, databaseId, phase }, 'database front connection failed'),
        admit: this.admitPeer,
        onRefused: (peer) =>
          this.opts.log.info({ databaseId, peer }, 'database front refused an outside client'),
      });
      try {
        await front.listen();
        live.front = front;
        this.live.set(databaseId, live);
        return front.port;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EADDRINUSE' || port !== undefined) throw err;
      }
    }
    return undefined;
  }

  private async beforeConnect(live: LiveDatabase): Promise<void> {
    if (!live.ready || !live.primary) throw new Error(`database ${live.id} is not ready`);
    await this.wakeForClient(live);
  }

  /** A client's wake: refused (its connection closed) while the service says no. */
  private async wakeForClient(live: LiveDatabase): Promise<void> {
    if (live.power === 'running') return;
    if (!(await this.opts.events.mayWake(live.id))) {
      throw new Error(`database ${live.id} may not wake now (its credit is blocked)`);
    }
    await this.wake(live);
  }

  async create(kind: DatabaseKind, primary: InstanceSpec, opts: { locale?: string }) {
    await this.engine(kind).provision(await this.envFor(primary), primary, opts);
  }

  async createStandby(
    databaseId: string,
    kind: DatabaseKind,
    primary: InstanceSpec,
    standby: InstanceSpec,
  ): Promise<void> {
    const engine = this.replicating(kind);
    // One identity for both: the standby connects to the primary's private socket.
    const env = await this.envFor({
      ...standby,
      owner: standby.owner ?? primary.owner ?? primary.id,
    });
    await this.withAwake(databaseId, () => engine.createStandby(env, primary, standby));
    // A served database watches its new standby from now on, in its own cgroup.
    const live = this.live.get(databaseId);
    if (!live?.ready) return;
    live.standby = standby;
    await this.adopt(live, standby);
  }

  async branch(sourceId: string, kind: DatabaseKind, source: InstanceSpec, target: InstanceSpec) {
    const env = await this.envFor(target);
    await this.withAwake(sourceId, () => this.engine(kind).branch(env, source, target));
  }

  async restore(kind: DatabaseKind, archive: ArchiveRef, asOf: Date, target: InstanceSpec) {
    await this.engine(kind).restore(await this.envFor(target), archive, asOf, target);
  }

  async archiveRange(kind: DatabaseKind, archive: ArchiveRef) {
    return this.engine(kind).archiveRange(await this.env(), archive);
  }

  /** Works on the archive's files alone (postgres): the database may stay asleep. */
  async pruneArchive(_databaseId: string, kind: DatabaseKind, archive: ArchiveRef, before: Date) {
    await this.engine(kind).pruneArchive(await this.env(), archive, before);
  }

  async flushArchive(databaseId: string, kind: DatabaseKind, inst: InstanceSpec) {
    const env = await this.envFor(inst);
    await this.withAwake(databaseId, () => this.engine(kind).flushArchive(env, inst));
  }

  async baseBackup(databaseId: string, kind: DatabaseKind, inst: InstanceSpec) {
    const env = await this.envFor(inst);
    await this.withAwake(databaseId, () => this.engine(kind).baseBackup(env, inst));
  }

  async prepareSqlReader(databaseId: string, kind: DatabaseKind, inst: InstanceSpec) {
    const env = await this.envFor(inst);
    await this.withAwake(databaseId, () => this.engine(kind).prepareSqlReader(env, inst));
  }

  async takeBack(
    _databaseId: string,
    kind: DatabaseKind,
    instances: InstanceSpec[],
    power: Power,
  ): Promise<Power> {
    const engine = this.engine(kind);
    let now = power;
    for (const inst of instances) {
      const env = await this.envFor(inst);
      if ((await engine.pid(env, inst)) === undefined && power !== 'stopped') {
        // The host restarted under it: start it again, awake.
        await engine.start(env, inst);
        now = 'running';
      }
    }
    return now;
  }

  async serve(databaseId: string, state: ServeState): Promise<void> {
    const live = this.live.get(databaseId);
    if (!live) throw new Error(`database ${databaseId} has no front on this host`);
    Object.assign(live, state);
    live.standby = state.standby;
    live.front.setTarget(state.primary.internalPort);
    if (state.power !== 'stopped') {
      await this.adopt(live, state.primary);
      if (state.standby) await this.adopt(live, state.standby);
    }
    live.ready = true;
  }

  async stop(databaseId: string): Promise<void> {
    const live = this.live.get(databaseId);
    if (!live) return;
    await this.serialize(live, async () => {
      if (live.power === 'stopped' || !live.primary) return;
      // Stopped before its servers are: the failover watchdog leaves it alone meanwhile.
      live.power = 'stopped';
      const env = await this.env();
      for (const inst of [live.primary, live.standby]) {
        if (!inst) continue;
        await this.thaw(inst.id);
        await this.engine(live.kind).stop(env, inst, 'fast');
      }
      this.opts.log.info({ id: live.id }, 'database stopped');
      await this.reportPower(live);
    });
  }

  async setPolicy(databaseId: string, policy: SuspendPolicy | null): Promise<void> {
    const live = this.live.get(databaseId);
    if (live) live.policy = policy;
  }

  /** The live state of a database, if this host serves it (tests and reports). */
  get(databaseId: string): LiveDatabase | undefined {
    return this.live.get(databaseId);
  }

  private async redundancyDeps(live: LiveDatabase): Promise<RedundancyDeps> {
    return {
      engine: this.replicating('postgres'),
      env: live.primary ? await this.envFor(live.primary) : await this.env(),
      log: this.opts.log,
      adopt: (live, inst) => this.adopt(live, inst),
      dropCgroup: (id) => this.dropCgroup(id),
      events: this.opts.events,
    };
  }

  /** Puts a running instance's process tree into its cgroup (limits, freezing). */
  private async adopt(live: LiveDatabase, inst: InstanceSpec): Promise<void> {
    const env = await this.env();
    const pid = await this.engine(live.kind).pid(env, inst);
    if (pid === undefined) return;
    if (inst === live.primary) live.primaryPid = pid;
    if (inst === live.standby) live.standbyPid = pid;
    const cg = await this.freezer();
    if (!cg) return;
    // Headroom above memoryMb: connections and work memory live outside shared buffers.
    await cg.create(inst.id, {
      memoryBytes: (live.memoryMb + 256) * 1024 * 1024,
      pids: 1024,
    });
    await cg.adopt(inst.id, pid);
  }

  /** Runs one transition of `live` after those already queued. */
  private serialize<T>(live: LiveDatabase, fn: () => Promise<T>): Promise<T> {
    const next = live.queue.then(fn, fn);
    live.queue = next.catch(() => {});
    return next;
  }

  /** Brings a sleeping database back: thaws a frozen one, starts a stopped one. */
  private wake(live: LiveDatabase): Promise<void> {
    if (live.power === 'running') return Promise.resolve();
    return this.serialize(live, async () => {
      if (live.power === 'running' || !live.primary) return;
      const engine = this.engine(live.kind);
      if (live.power === 'suspended') {
        const cg = await this.freezer();
        if (cg) await cg.thaw(live.primary.id);
        if (live.standby && cg) await cg.thaw(live.standby.id);
      } else {
        await engine.start(await this.envFor(live.primary), live.primary);
        await this.adopt(live, live.primary);
        if (live.standby) {
          await engine.start(await this.envFor(live.standby), live.standby);
          await this.adopt(live, live.standby);
        }
      }
      live.power = 'running';
      await this.reportPower(live);
    });
  }

  /** Runs platform work against a database that must be awake (backup, branch, fork). */
  private async withAwake<T>(databaseId: string, fn: () => Promise<T>): Promise<T> {
    const live = this.live.get(databaseId);
    if (!live) return fn();
    live.busy++;
    try {
      await this.wake(live);
      return await fn();
    } finally {
      live.busy--;
      live.lastBusyAt = Date.now();
    }
  }

  private async reportPower(live: LiveDatabase): Promise<void> {
    await this.opts.events
      .onPowerChanged(live.id, live.power)
      .catch((err: unknown) => this.opts.log.warn({ err, id: live.id }, 'power not recorded'));
  }

  /** Applies the sleep policy to every database once. */
  async sleepTick(now = Date.now()): Promise<void> {
    await this.freezer();
    for (const live of this.live.values()) {
      if (!live.ready || live.busy > 0 || live.standby || !live.primary) continue;
      const action = sleepAction({
        policy: live.policy,
        memoryMb: live.memoryMb,
        power: live.power,
        idleMs: now - lastActivity(live),
        canFreeze: this.canFreeze,
      });
      if (action === 'none') continue;
      await this.serialize(live, () => this.sleep(live, action)).catch((err: unknown) =>
        this.opts.log.warn({ err, id: live.id }, 'database did not go to sleep'),
      );
    }
  }

  private async sleep(live: LiveDatabase, action: 'suspend' | 'stop'): Promise<void> {
    // Traffic may have come while this waited in the queue.
    const idleMs = Date.now() - lastActivity(live);
    const again = sleepAction({
      policy: live.policy,
      memoryMb: live.memoryMb,
      power: live.power,
      idleMs,
      canFreeze: this.canFreeze,
    });
    if (again !== action || live.busy > 0 || !live.primary) return;
    const cg = await this.freezer();
    if (action === 'suspend' && cg) {
      await cg.freeze(live.primary.id);
      live.power = 'suspended';
    } else {
      if (live.power === 'suspended' && cg) await cg.thaw(live.primary.id);
      await this.engine(live.kind).stop(await this.env(), live.primary, 'fast');
      live.power = 'stopped';
    }
    this.opts.log.info({ id: live.id, power: live.power }, 'database asleep');
    await this.reportPower(live);
  }

  /**
   * Watches redundant databases: a dead primary is replaced by its standby; a dead
   * standby is let go of (or every commit on the primary would wait for it) and rebuilt.
   */
  async watchdogTick(): Promise<void> {
    for (const live of this.live.values()) {
      if (!live.ready || !live.standby || live.power !== 'running') continue;
      if (live.primaryPid && !isAlive(live.primaryPid)) {
        await this.serialize(live, async () =>
          failover(await this.redundancyDeps(live), live),
        ).catch((err: unknown) => this.opts.log.error({ err, id: live.id }, 'failover failed'));
      } else if (live.standbyPid && !isAlive(live.standbyPid)) {
        await this.serialize(live, async () =>
          loseStandby(await this.redundancyDeps(live), live),
        ).catch((err: unknown) =>
          this.opts.log.error({ err, id: live.id }, 'standby loss not handled'),
        );
      }
    }
  }

  async forget(databaseId: string): Promise<void> {
    const live = this.live.get(databaseId);
    if (!live) return;
    this.live.delete(databaseId);
    live.ready = false;
    await live.front.close();
  }

  async destroy(instances: InstanceRef[]): Promise<void> {
    const env = await this.env();
    for (const ref of instances) {
      await this.thaw(ref.id);
      await this.engine(ref.kind).destroy(env, specForDestroy(ref));
      await this.dropCgroup(ref.id);
    }
  }

  async destroyArchive(kind: DatabaseKind, archiveId: string): Promise<void> {
    await this.engine(kind).destroyArchive(await this.env(), { id: archiveId });
  }

  /** Removes the cgroup of an instance (after its server stopped). */
  private async dropCgroup(instanceId: string): Promise<void> {
    await (await this.freezer())?.remove(instanceId);
  }

  /** Thaws a frozen instance so it can be stopped or copied. */
  private async thaw(instanceId: string): Promise<void> {
    const cg = await this.freezer();
    if (cg && (await cg.isFrozen(instanceId).catch(() => false))) await cg.thaw(instanceId);
  }

  startTickers(): void {
    const every = (ms: number, fn: () => Promise<void>) => {
      let running = false;
      const t = setInterval(() => {
        if (running || this.stopped) return;
        running = true;
        fn()
          .catch((err: unknown) => this.opts.log.warn({ err }, 'database host tick failed'))
          .finally(() => (running = false));
      }, ms);
      t.unref();
      this.timers.push(t);
    };
    every(this.opts.sleepTickMs ?? 1000, () => this.sleepTick());
    every(this.opts.watchdogTickMs ?? 250, () => this.watchdogTick());
  }

  async close(): Promise<void> {
    this.stopped = true;
    for (const t of this.timers) clearInterval(t);
    await Promise.allSettled([...this.live.values()].map((l) => l.front.close()));
    this.live.clear();
  }
}

/** The identity key of templates (no database id looks like it). */
const TEMPLATES_IDENTITY = 'templates';

/** A minimal spec for destroying an instance whose row may be gone. */
function specForDestroy(ref: InstanceRef): InstanceSpec {
  return { id: ref.id, volume: ref.volume, internalPort: 0, memoryMb: 0, sizeGb: 1, password: '' };
}
