/**
 * The relay behind public UDP endpoints: one socket per endpoint on the listen host,
 * and per client address a flow (a socket of its own toward the machine) so replies find
 * their way back; flows end after `FLOW_IDLE_MS` without a datagram either way. A new
 * flow picks one of the app's running machines (round-robin); a flow stays with its
 * machine while that machine runs.
 *
 * A userspace relay rather than nft DNAT: it needs no rules rewritten as machines come
 * and go or move (a flow simply asks again), it reaches machines wherever an address
 * routes (other hosts later), and it serves loopback clients too, which DNAT of locally
 * made packets does not without `route_localnet`. The price is one copy per datagram in
 * pier's process; see docs/architecture.md.
 */
import dgram from 'node:dgram';
import type { ServiceContext } from '../context.js';

const FLOW_IDLE_MS = 60_000;
const MAX_FLOWS_PER_ENDPOINT = 4096;
const TARGETS_TTL_MS = 2_000;

interface Flow {
  socket: dgram.Socket;
  target: string;
  last: number;
}

interface Endpoint {
  id: string;
  appId: string;
  publicPort: number;
  targetPort: number;
  socket: dgram.Socket;
  flows: Map<string, Flow>;
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
  private readonly targets = new Map<string, { at: number; ips: Promise<string[]> }>();
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
    for (const r of rows) {
      if (this.endpoints.has(r.id)) continue;
      await this.open(r).catch((err: unknown) =>
        this.ctx.log.warn({ err, port: r.public_port }, 'udp endpoint not bound'),
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
  }

  private async inbound(ep: Endpoint, msg: Buffer, rinfo: dgram.RemoteInfo): Promise<void> {
    const key = `${rinfo.address}:${rinfo.port}`;
    let flow = ep.flows.get(key);
    if (!flow) {
      if (ep.flows.size >= MAX_FLOWS_PER_ENDPOINT) return;
      const ips = await this.machineIps(ep.appId).catch(() => []);
      if (!ips.length || !this.endpoints.has(ep.id)) return; // datagrams may be lost
      flow = ep.flows.get(key); // another datagram of this client made it meanwhile
      if (!flow) {
        const target = ips[ep.cursor++ % ips.length]!;
        const socket = dgram.createSocket('udp4');
        const made: Flow = { socket, target, last: Date.now() };
        socket.on('message', (reply) => {
          made.last = Date.now();
          ep.socket.send(reply, rinfo.port, rinfo.address);
        });
        socket.on('error', () => this.endFlow(ep, key));
        ep.flows.set(key, made);
        flow = made;
      }
    }
    flow.last = Date.now();
    flow.socket.send(msg, ep.targetPort, flow.target);
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

  /** Private addresses of the app's running machines, looked up at most every 2 s. */
  private machineIps(appId: string): Promise<string[]> {
    const hit = this.targets.get(appId);
    if (hit && Date.now() - hit.at < TARGETS_TTL_MS) return hit.ips;
    const ips = this.ctx.db
      .selectFrom('machines')
      .select('private_ip')
      .where('app_id', '=', appId)
      .where('observed_state', '=', 'running')
      .where('private_ip', 'is not', null)
      .orderBy('created_at')
      .execute()
      .then((rows) => rows.map((r) => r.private_ip!));
    this.targets.set(appId, { at: Date.now(), ips });
    return ips;
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
