/**
 * The relay behind public UDP endpoints: one socket per endpoint on the listen host,
 * and per client address a flow (a socket of its own toward the machine) so replies find
 * their way back; flows end after `FLOW_IDLE_MS` without a datagram either way. A new
 * flow picks one of the app's running machines (round-robin); a flow stays with its
 * machine while that machine runs. Every datagram counts as activity of its machine for
 * the sleep policy, as a proxied request does.
 *
 * An app with no running machine is woken as the proxy wakes one (a suspended machine
 * before a stopped one, through the same `machineAction` start): the client's datagrams
 * that arrive meanwhile are held, up to `MAX_HELD` in order (and `MAX_HELD_BYTES` for all
 * clients of the endpoint), and sent once the machine runs; later ones, and all of them
 * when the wake fails, are dropped (UDP senders retry; a datagram after a failed wake
 * tries again).
 *
 * A userspace relay rather than nft DNAT: it needs no rules rewritten as machines come
 * and go or move (a flow simply asks again), it reaches machines wherever an address
 * routes (other hosts later), and it serves loopback clients too, which DNAT of locally
 * made packets does not without `route_localnet`. The price is one copy per datagram in
 * pier's process; see docs/architecture.md.
 */
import dgram from 'node:dgram';
import { sql } from 'kysely';
import type { ServiceContext } from '../context.js';
import { machineAction } from '../machines/lifecycle.js';
import { activityOf } from '../machines/sleep.js';

const FLOW_IDLE_MS = 60_000;
const MAX_FLOWS_PER_ENDPOINT = 4096;
const TARGETS_TTL_MS = 2_000;
/** Datagrams of one client held while its flow waits for a machine (a lookup or a wake). */
const MAX_HELD = 64;
/** Bytes held per endpoint at most, whatever the number of waiting clients. */
const MAX_HELD_BYTES = 1024 * 1024;

interface Flow {
  socket: dgram.Socket;
  target: Target;
  last: number;
}

/** A running machine of the app: where a flow sends. */
interface Target {
  machineId: string;
  ip: string;
}

/** An app's running machines as last looked up, until a word that one of them changed. */
interface Targets {
  at: number;
  list: Promise<Target[]>;
  /** Drops this entry; listens for the change words of the machines in it. */
  drop: () => void;
  ids: string[];
}

interface Endpoint {
  id: string;
  appId: string;
  publicPort: number;
  targetPort: number;
  socket: dgram.Socket;
  flows: Map<string, Flow>;
  /** Clients whose flow waits for a machine, with their datagrams held meanwhile. */
  waiting: Map<string, Buffer[]>;
  /** Bytes of the datagrams in `waiting`. */
  heldBytes: number;
  cursor: number;
}

export interface EndpointRow {
  id: string;
  app_id: string;
  public_port: number;
  target_port: number;
}

export class UdpRelays {
  private readonly endpoints = new Map<string, Endpoint>();
  private readonly targets = new Map<string, Targets>();
  /**
   * Endpoints whose port another process of this host holds: another pier replica, which
   * serves it (Node 20's dgram has no SO_REUSEPORT to share it). Said once; every sync
   * tries again, so this process takes the port over within 5 s of that one releasing it.
   */
  private readonly heldElsewhere = new Set<string>();
  /** Wakes under way, per app: datagrams of many clients share one. */
  private readonly waking = new Map<string, Promise<void>>();
  private sweeper: NodeJS.Timeout | undefined;

  constructor(
    private readonly ctx: ServiceContext,
    private readonly host: string,
  ) {}

  /** Opens every endpoint of the store and closes those gone; then every 5 s. */
  async start(): Promise<void> {
    await this.sync();
    this.sweeper = setInterval(() => {
      this.expireFlows();
      this.sync().catch((err: unknown) => this.ctx.log.warn({ err }, 'udp relay sync failed'));
    }, 5_000);
    this.sweeper.unref();
  }

  async sync(): Promise<void> {
    const rows = await this.ctx.db
      .selectFrom('udp_endpoints')
      .select(['id', 'app_id', 'public_port', 'target_port'])
      .execute();
    const want = new Set(rows.map((r) => r.id));
    for (const id of [...this.endpoints.keys()]) if (!want.has(id)) this.close(id);
    for (const id of this.heldElsewhere) if (!want.has(id)) this.heldElsewhere.delete(id);
    for (const r of rows) {
      if (this.endpoints.has(r.id)) continue;
      await this.open(r).then(
        () => {
          if (this.heldElsewhere.delete(r.id))
            this.ctx.log.info({ port: r.public_port }, 'udp endpoint taken over');
        },
        (err: NodeJS.ErrnoException) => {
          if (err.code !== 'EADDRINUSE')
            return this.ctx.log.warn({ err, port: r.public_port }, 'udp endpoint not bound');
          if (this.heldElsewhere.has(r.id)) return;
          this.heldElsewhere.add(r.id);
          this.ctx.log.info(
            { port: r.public_port },
            'udp port held by another process on this host (another pier replica serves it); taken over once released',
          );
        },
      );
    }
  }

  /** Binds the endpoint's public port; rejects when it cannot (EADDRINUSE). */
  open(row: EndpointRow): Promise<void> {
    if (this.endpoints.has(row.id)) return Promise.resolve();
    const socket = dgram.createSocket('udp4');
    const ep: Endpoint = {
      id: row.id,
      appId: row.app_id,
      publicPort: row.public_port,
      targetPort: row.target_port,
      socket,
      flows: new Map(),
      waiting: new Map(),
      heldBytes: 0,
      cursor: 0,
    };
    return new Promise((resolve, reject) => {
      socket.once('error', (err) => {
        socket.close();
        reject(err);
      });
      socket.bind(row.public_port, this.host, () => {
        socket.removeAllListeners('error');
        socket.on('error', (err) => this.ctx.log.warn({ err, id: row.id }, 'udp endpoint error'));
        socket.on('message', (msg, rinfo) => void this.inbound(ep, msg, rinfo));
        this.endpoints.set(row.id, ep);
        resolve();
      });
    });
  }

  close(id: string): void {
    const ep = this.endpoints.get(id);
    if (!ep) return;
    this.endpoints.delete(id);
    for (const f of ep.flows.values()) f.socket.close();
    ep.socket.close();
  }

  stop(): void {
    clearInterval(this.sweeper);
    for (const id of [...this.endpoints.keys()]) this.close(id);
    for (const appId of [...this.targets.keys()]) this.forgetTargets(appId);
  }

  private async inbound(ep: Endpoint, msg: Buffer, rinfo: dgram.RemoteInfo): Promise<void> {
    const key = `${rinfo.address}:${rinfo.port}`;
    const flow = ep.flows.get(key);
    if (flow) {
      // A flow stays with its machine while that one runs; else a new flow (and a wake).
      const running = await this.runningTargets(ep.appId).catch(() => [flow.target]);
      if (running.some((t) => t.machineId === flow.target.machineId))
        return this.forward(ep, flow, msg);
      this.endFlow(ep, key);
    }
    const room = ep.heldBytes + msg.length <= MAX_HELD_BYTES;
    const held = ep.waiting.get(key);
    if (held) {
      if (held.length < MAX_HELD && room) {
        held.push(msg);
        ep.heldBytes += msg.length;
      }
      return;
    }
    if (ep.flows.size + ep.waiting.size >= MAX_FLOWS_PER_ENDPOINT || !room) return;
    const queue = [msg];
    ep.waiting.set(key, queue);
    ep.heldBytes += msg.length;
    let target: Target | undefined;
    try {
      const list = await this.runningTargets(ep.appId);
      target = list.length ? list[ep.cursor++ % list.length] : await this.wake(ep.appId);
    } catch (err) {
      this.ctx.log.warn({ err, endpoint: ep.id }, 'udp relay: no machine for a new flow');
    } finally {
      ep.waiting.delete(key);
      for (const m of queue) ep.heldBytes -= m.length;
    }
    if (!target || !this.endpoints.has(ep.id)) return; // the held datagrams are lost
    const socket = dgram.createSocket('udp4');
    const made: Flow = { socket, target, last: Date.now() };
    socket.on('message', (reply) => {
      made.last = Date.now();
      ep.socket.send(reply, rinfo.port, rinfo.address);
    });
    socket.on('error', () => this.endFlow(ep, key));
    ep.flows.set(key, made);
    for (const m of queue) this.forward(ep, made, m);
  }

  private forward(ep: Endpoint, flow: Flow, msg: Buffer): void {
    flow.last = Date.now();
    activityOf(this.ctx).set(flow.target.machineId, flow.last);
    flow.socket.send(msg, ep.targetPort, flow.target.ip);
  }

  /**
   * Wakes one sleeping machine of the app (suspended before stopped, as the proxy does),
   * shared by everyone asking meanwhile; the machine once it runs, undefined when the app
   * has none to wake.
   */
  private async wake(appId: string): Promise<Target | undefined> {
    let pending = this.waking.get(appId);
    if (!pending) {
      pending = this.wakeOne(appId).finally(() => this.waking.delete(appId));
      this.waking.set(appId, pending);
    }
    await pending;
    this.forgetTargets(appId);
    return (await this.runningTargets(appId))[0];
  }

  private async wakeOne(appId: string): Promise<void> {
    const sleeper = await this.ctx.db
      .selectFrom('machines')
      .select(['id', 'org_id'])
      .where('app_id', '=', appId)
      .where((eb) =>
        eb.or([
          eb('observed_state', '=', 'suspended'),
          // Stopped by its sleep policy: still wanted running, so traffic starts it.
          eb.and([eb('observed_state', '=', 'stopped'), eb('desired_state', '=', 'running')]),
        ]),
      )
      .orderBy(sql`observed_state = 'suspended'`, 'desc')
      .orderBy('created_at')
      .executeTakeFirst();
    if (sleeper) await machineAction(this.ctx, sleeper.org_id, sleeper.id, 'start');
  }

  private endFlow(ep: Endpoint, key: string): void {
    const flow = ep.flows.get(key);
    if (!flow) return;
    ep.flows.delete(key);
    flow.socket.close();
  }

  private expireFlows(): void {
    const now = Date.now();
    for (const ep of this.endpoints.values()) {
      for (const [key, flow] of ep.flows) if (now - flow.last > FLOW_IDLE_MS) this.endFlow(ep, key);
    }
  }

  /**
   * The app's running machines with their private addresses, looked up at most every 2 s,
   * and again as soon as one of them changes in this process (suspended, stopped): a new
   * flow never goes to a machine that just fell asleep.
   */
  private runningTargets(appId: string): Promise<Target[]> {
    const hit = this.targets.get(appId);
    if (hit && Date.now() - hit.at < TARGETS_TTL_MS) return hit.list;
    this.forgetTargets(appId);
    const list = this.ctx.db
      .selectFrom('machines')
      .select(['id', 'private_ip'])
      .where('app_id', '=', appId)
      .where('observed_state', '=', 'running')
      .where('private_ip', 'is not', null)
      .orderBy('created_at')
      .execute()
      .then((rows) => rows.map((r) => ({ machineId: r.id, ip: r.private_ip! })));
    const entry: Targets = { at: Date.now(), list, ids: [], drop: () => this.forgetTargets(appId) };
    this.targets.set(appId, entry);
    list.then(
      (found) => {
        if (this.targets.get(appId) !== entry) return;
        entry.ids = found.map((t) => t.machineId);
        for (const id of entry.ids) this.ctx.memory.machineChanges.once(id, entry.drop);
      },
      () => this.forgetTargets(appId),
    );
    return list;
  }

  private forgetTargets(appId: string): void {
    const entry = this.targets.get(appId);
    if (!entry) return;
    this.targets.delete(appId);
    for (const id of entry.ids) this.ctx.memory.machineChanges.off(id, entry.drop);
  }
}

const relays = new WeakMap<ServiceContext, UdpRelays>();

/** Starts this process's relay (platform.ts); the UDP service opens endpoints through it. */
export async function startUdpRelays(ctx: ServiceContext, host: string): Promise<UdpRelays> {
  const r = new UdpRelays(ctx, host);
  await r.start();
  relays.set(ctx, r);
  return r;
}

export function udpRelaysOf(ctx: ServiceContext): UdpRelays | undefined {
  return relays.get(ctx);
}
