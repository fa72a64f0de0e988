/**
 * The host side of managed databases: the engines, the TCP fronts that customers connect
 * to, the cgroups that freeze idle servers, the sleep policy's clock and the failover
 * watchdog of redundant databases. The databases service decides what should exist (rows
 * and jobs); this class makes the host match and keeps it matching.
 *
 * Servers outlive `pier serve`: they run in their own sessions. Fronts live in this
 * process, so on start every database's front is opened again on its port and every
 * server is found (or started) and taken back.
 */
import path from 'node:path';
import type { Logger } from 'pino';
import type { Config } from '../../config.js';
import { ensureCa } from '../../crypto/ca.js';
import type { SecretBox } from '../../crypto/secret-box.js';
import type { PoolHandle } from '../../storage/pool-handle.js';
import type { Db } from '../../store/db.js';
import type { SuspendPolicyRow } from '../../store/schema.js';
import { resolveServiceUser } from '../../host/service-user.js';
import type { DatabaseEngine, EngineEnv, InstanceSpec, ReplicatingEngine } from '../engine.js';
import { TcpFront } from '../front/tcp-front.js';
import { PostgresEngine } from '../postgres/index.js';
import { RedisEngine } from '../redis/index.js';
import { CgroupSet } from '../../host/cgroups/cgroup.js';
import {
  candidatePorts,
  freeLoopbackPort,
  parsePortRange,
  type PortRange,
} from '../../host/ports.js';
import { failover, isAlive, loseStandby, type RedundancyDeps } from './failover.js';
import { sleepAction, type Power } from '../../host/sleep-policy.js';

/** What the host knows of a database it serves. */
export interface LiveDatabase {
  id: string;
  kind: 'postgres' | 'redis';
  front: TcpFront;
  /** False while a copy is restoring: connections are refused until it is ready. */
  ready: boolean;
  primary?: InstanceSpec;
  standby?: InstanceSpec;
  power: Power;
  policy: SuspendPolicyRow | null;
  memoryMb: number;
  /** Platform work in progress (branch, backup, ...): the database must not sleep meanwhile. */
  busy: number;
  /** When platform work last ended: it counts as activity, like a client's bytes. */
  lastBusyAt: number;
  /** Serializes sleep, wake and failover of this database. */
  queue: Promise<unknown>;
  primaryPid?: number;
  standbyPid?: number;
}

export interface DatabaseHostOptions {
  config: Config;
  db: Db;
  box: SecretBox;
  pool: PoolHandle;
  log: Logger;
  /** How often the sleep policy and the failover watchdog look (default 1 s / 250 ms). */
  sleepTickMs?: number;
  watchdogTickMs?: number;
  /** Called after a standby was promoted, so a new standby can be built (a durable job). */
  onFailover?: (databaseId: string) => Promise<void>;
}

export class DatabaseHost {
  readonly id = 'local';
  private readonly live = new Map<string, LiveDatabase>();
  private readonly engines: Record<'postgres' | 'redis', DatabaseEngine>;
  private readonly range: PortRange;
  private envPromise: Promise<EngineEnv> | undefined;
  private cgroups: Promise<CgroupSet | undefined> | undefined;
  private freezerKnown: CgroupSet | undefined | null = null;
  private timers: NodeJS.Timeout[] = [];
  private stopped = false;

  constructor(private readonly opts: DatabaseHostOptions) {
    this.engines = { postgres: new PostgresEngine(), redis: new RedisEngine() };
    this.range = parsePortRange(opts.config.databasePorts);
  }

  engine(kind: 'postgres' | 'redis'): DatabaseEngine {
    return this.engines[kind];
  }

  postgres(): ReplicatingEngine {
    return this.engines.postgres as ReplicatingEngine;
  }

  /** What engines need, made on first use: the pool, the service user, TLS files. */
  env(): Promise<EngineEnv> {
    this.envPromise ??= (async () => {
      const { config, log } = this.opts;
      const { pool } = await this.opts.pool.get();
      const user = await resolveServiceUser(config.serviceUser);
      const host = new URL(config.publicUrl).hostname;
      const tls = await ensureCa(path.join(config.dataDir, 'ca'), [host, 'localhost', '127.0.0.1']);
      return {
        pool,
        user,
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

  /** A loopback port for a new server instance. */
  internalPort(): Promise<number> {
    return freeLoopbackPort();
  }

  /**
   * Opens the front of a database: on `port` (after a restart) or on a free port of the
   * range (a new database). Resolves with the port; undefined means the range is full.
   */
  async openFront(databaseId: string, kind: LiveDatabase['kind'], port?: number) {
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
        beforeTraffic: () => (live.power === 'running' ? undefined : this.wake(live)),
        onError: (err, phase) =>
          this.opts.log.debug({ err, databaseId, phase }, 'database front connection failed'),
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
    await this.wake(live);
  }

  /**
   * Marks a database ready with its instances and rules: the front starts piping to the
   * primary, and its servers join their cgroups (so they can be frozen later).
   */
  async serve(
    databaseId: string,
    state: {
      primary: InstanceSpec;
      standby?: InstanceSpec;
      power: Power;
      policy: SuspendPolicyRow | null;
      memoryMb: number;
    },
  ): Promise<void> {
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

  /** Updates the sleep policy of a served database (PATCH). */
  setPolicy(databaseId: string, policy: SuspendPolicyRow | null): void {
    const live = this.live.get(databaseId);
    if (live) live.policy = policy;
  }

  /** The live state of a database, if this host serves it (tests and reports). */
  get(databaseId: string): LiveDatabase | undefined {
    return this.live.get(databaseId);
  }

  private redundancyDeps(): RedundancyDeps {
    return { db: this.opts.db, log: this.opts.log, onFailover: this.opts.onFailover };
  }

  /** Puts a running instance's process tree into its cgroup (limits, freezing). */
  async adopt(live: LiveDatabase, inst: InstanceSpec): Promise<void> {
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
  wake(live: LiveDatabase): Promise<void> {
    if (live.power === 'running') return Promise.resolve();
    return this.serialize(live, async () => {
      if (live.power === 'running' || !live.primary) return;
      const env = await this.env();
      const engine = this.engine(live.kind);
      if (live.power === 'suspended') {
        const cg = await this.freezer();
        if (cg) await cg.thaw(live.primary.id);
        if (live.standby && cg) await cg.thaw(live.standby.id);
      } else {
        await engine.start(env, live.primary);
        await this.adopt(live, live.primary);
        if (live.standby) {
          await engine.start(env, live.standby);
          await this.adopt(live, live.standby);
        }
      }
      live.power = 'running';
      await this.recordPower(live);
    });
  }

  /** Runs platform work against a database that must be awake (backup, branch, fork). */
  async withAwake<T>(databaseId: string, fn: () => Promise<T>): Promise<T> {
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

  private async recordPower(live: LiveDatabase): Promise<void> {
    await this.opts.db
      .updateTable('databases')
      .set({ power: live.power })
      .where('id', '=', live.id)
      .execute()
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
    await this.recordPower(live);
  }

  /**
   * Watches redundant databases: a dead primary is replaced by its standby; a dead
   * standby is let go of (or every commit on the primary would wait for it) and rebuilt.
   */
  async watchdogTick(): Promise<void> {
    for (const live of this.live.values()) {
      if (!live.ready || !live.standby || live.power !== 'running') continue;
      if (live.primaryPid && !isAlive(live.primaryPid)) {
        await this.serialize(live, () => failover(this, this.redundancyDeps(), live)).catch(
          (err: unknown) => this.opts.log.error({ err, id: live.id }, 'failover failed'),
        );
      } else if (live.standbyPid && !isAlive(live.standbyPid)) {
        await this.serialize(live, () => loseStandby(this, this.redundancyDeps(), live)).catch(
          (err: unknown) => this.opts.log.error({ err, id: live.id }, 'standby loss not handled'),
        );
      }
    }
  }

  /** Adds a standby to a served database after it was built, in its own cgroup. */
  async addStandby(databaseId: string, standby: InstanceSpec): Promise<void> {
    const live = this.live.get(databaseId);
    if (!live) return;
    live.standby = standby;
    await this.adopt(live, standby);
  }

  /** Stops serving a database: closes its front and forgets it (servers are left to the caller). */
  async forget(databaseId: string): Promise<void> {
    const live = this.live.get(databaseId);
    if (!live) return;
    this.live.delete(databaseId);
    live.ready = false;
    await live.front.close();
  }

  /** Removes the cgroup of an instance (after its server stopped). */
  async dropCgroup(instanceId: string): Promise<void> {
    await (await this.freezer())?.remove(instanceId);
  }

  /** Thaws a frozen instance so it can be stopped or copied. */
  async thaw(instanceId: string): Promise<void> {
    const cg = await this.freezer();
    if (cg && (await cg.isFrozen(instanceId).catch(() => false))) await cg.thaw(instanceId);
  }

  /** Starts the tickers of the sleep policy and the failover watchdog. */
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

  /** Closes every front; servers keep running and are taken back on the next start. */
  async close(): Promise<void> {
    this.stopped = true;
    for (const t of this.timers) clearInterval(t);
    await Promise.allSettled([...this.live.values()].map((l) => l.front.close()));
    this.live.clear();
  }
}

function lastActivity(live: LiveDatabase): number {
  return Math.max(live.front.lastActivityAt, live.lastBusyAt);
}
