/**
 * The resolver machines use: a DNS server on the bridge's gateway (port 53, UDP and TCP),
 * named in every machine's `/etc/resolv.conf`. It answers each query by the asking
 * machine's egress, looked up by its source address (the walls drop spoofed sources):
 * - open egress: the query goes to the host's resolvers and their answer comes back as is;
 * - `allowlist`: only the allowlist's names answer, with the very addresses the walls
 *   allow for them (the walls' own lookups, egress-names.ts), so a name a machine can
 *   resolve is a name it can reach, even when a service hands out other addresses to each
 *   lookup; other record types of those names answer empty, other names REFUSED;
 * - `deny-all`, or an address that is no machine: REFUSED.
 * Queries are bounded: at most MAX_IN_FLIGHT forwarded at once (SERVFAIL beyond), each
 * waits at most FORWARD_TIMEOUT_MS, TCP connections are capped and closed when idle, so a
 * machine that floods its resolver slows only its own answers.
 */
import dgram from 'node:dgram';
import net from 'node:net';
import { answer, parseQuery, QTYPE, RCODE } from './dns-wire.js';

/** How a machine's queries are answered (see the module comment). */
export type DnsPolicy =
  | { mode: 'open' }
  | { mode: 'deny-all' }
  | { mode: 'allowlist'; names: ReadonlyMap<string, { addresses: string[]; ttlS: number }> };

/** Options of {@link MachineDns}. */
export interface MachineDnsOptions {
  /** The address to listen on: the bridge's gateway. */
  host: string;
  /** Default 53 (what resolv.conf implies); tests pick a free one with 0. */
  port?: number;
  /** The resolvers open-egress queries go to (`ip` or `ip:port`). */
  upstream: string[];
  /** The policy of the machine at `ip`, or undefined when no machine has it. */
  policyOf(ip: string): DnsPolicy | undefined;
  log: { warn(obj: object, msg: string): void };
}

const FORWARD_TIMEOUT_MS = 2500;
const MAX_IN_FLIGHT = 256;
const MAX_TCP_CONNECTIONS = 128;
const TCP_IDLE_MS = 10_000;

/** A running resolver for one machines network. */
export class MachineDns {
  private readonly udp = dgram.createSocket('udp4');
  private readonly tcp = net.createServer();
  private inFlight = 0;
  private bound = 0;

  private constructor(private readonly opts: MachineDnsOptions) {}

  /** Starts listening on UDP and TCP; throws when the address or port is taken. */
  static async start(opts: MachineDnsOptions): Promise<MachineDns> {
    const dns = new MachineDns(opts);
    try {
      await dns.listen();
    } catch (err) {
      await dns.close();
      throw err;
    }
    return dns;
  }

  /** The port both listeners are on. */
  get port(): number {
    return this.bound;
  }

  private async listen(): Promise<void> {
    this.udp.on('message', (msg, from) => {
      void this.respond(msg, from.address, 'udp').then((reply) => {
        if (reply) this.udp.send(reply, from.port, from.address);
      });
    });
    this.udp.on('error', (err) => this.opts.log.warn({ err: err.message }, 'machine DNS (udp)'));
    await new Promise<void>((resolve, reject) => {
      this.udp.once('error', reject);
      this.udp.bind(this.opts.port ?? 53, this.opts.host, () => {
        this.udp.off('error', reject);
        resolve();
      });
    });
    this.bound = this.udp.address().port;
    this.tcp.maxConnections = MAX_TCP_CONNECTIONS;
    this.tcp.on('connection', (socket) => this.serveTcp(socket));
    this.tcp.on('error', (err) => this.opts.log.warn({ err: err.message }, 'machine DNS (tcp)'));
    await new Promise<void>((resolve, reject) => {
      this.tcp.once('error', reject);
      this.tcp.listen({ host: this.opts.host, port: this.bound }, () => {
        this.tcp.off('error', reject);
        resolve();
      });
    });
  }

  /** Length-prefixed queries on one connection (RFC 1035 §4.2.2), answered in order. */
  private serveTcp(socket: net.Socket): void {
    socket.setTimeout(TCP_IDLE_MS, () => socket.destroy());
    socket.on('error', () => socket.destroy());
    const from = socket.remoteAddress?.replace(/^::ffff:/, '') ?? '';
    let pending = Buffer.alloc(0);
    let chain = Promise.resolve();
    socket.on('data', (chunk: Buffer) => {
      pending = Buffer.concat([pending, chunk]);
      while (pending.length >= 2) {
        const len = pending.readUInt16BE(0);
        if (pending.length < 2 + len) break;
        const msg = pending.subarray(2, 2 + len);
        pending = pending.subarray(2 + len);
        chain = chain.then(async () => {
          const reply = await this.respond(msg, from, 'tcp');
          if (!reply || socket.destroyed) return;
          const size = Buffer.alloc(2);
          size.writeUInt16BE(reply.length);
          socket.write(Buffer.concat([size, reply]));
        });
      }
    });
  }

  /** The reply to `msg` from `ip`, or undefined to stay silent (not a query). */
  private async respond(msg: Buffer, ip: string, via: 'udp' | 'tcp'): Promise<Buffer | undefined> {
    const q = parseQuery(msg);
    if (!q) return undefined;
    const policy = this.opts.policyOf(ip);
    if (!policy || policy.mode === 'deny-all') return answer(msg, q, { rcode: RCODE.refused });
    if (policy.mode === 'allowlist') {
      const known = policy.names.get(q.name);
      if (!known) return answer(msg, q, { rcode: RCODE.refused });
      return answer(msg, q, {
        rcode: RCODE.noError,
        addresses: q.type === QTYPE.A ? known.addresses : [],
        ttl: known.ttlS,
      });
    }
    if (this.inFlight >= MAX_IN_FLIGHT) return answer(msg, q, { rcode: RCODE.servFail });
    this.inFlight++;
    try {
      for (const server of this.opts.upstream) {
        const reply = await (via === 'udp' ? forwardUdp : forwardTcp)(msg, server).catch(
          () => undefined,
        );
        // The upstream's answer must be to this question: same id, a response.
        if (reply && reply.length >= 12 && reply.readUInt16BE(0) === q.id) return reply;
      }
      return answer(msg, q, { rcode: RCODE.servFail });
    } finally {
      this.inFlight--;
    }
  }

  /** Stops both listeners. */
  async close(): Promise<void> {
    await new Promise<void>((r) => this.udp.close(() => r())).catch(() => {});
    await new Promise<void>((r) => this.tcp.close(() => r()));
  }
}

/** `ip` or `ip:port` (IPv4), or `[ip6]:port`, as host and port. */
function hostPort(server: string): { host: string; port: number } {
  const m = /^\[(.+)\]:(\d+)$/.exec(server) ?? /^([^:]+):(\d+)$/.exec(server);
  return m ? { host: m[1]!, port: Number(m[2]) } : { host: server, port: 53 };
}

/**
 * Sends `msg` to `server` from a fresh socket (a fresh source port) and waits for its
 * reply. The socket is connected, so only that server can answer, and a server that is
 * not there fails at once (the ICMP error reaches a connected socket).
 */
function forwardUdp(msg: Buffer, server: string): Promise<Buffer> {
  const { host, port } = hostPort(server);
  const socket = dgram.createSocket(net.isIPv6(host) ? 'udp6' : 'udp4');
  return new Promise<Buffer>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('upstream timeout')), FORWARD_TIMEOUT_MS);
    socket.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    socket.on('message', (reply) => {
      clearTimeout(timer);
      resolve(reply);
    });
    socket.connect(port, host, () => socket.send(msg));
  }).finally(() => socket.close());
}

/** Asks `server` over TCP (for TCP queries: answers too large for UDP). */
function forwardTcp(msg: Buffer, server: string): Promise<Buffer> {
  const { host, port } = hostPort(server);
  return new Promise<Buffer>((resolve, reject) => {
    const socket = net.connect({ host, port });
    socket.setTimeout(FORWARD_TIMEOUT_MS, () => socket.destroy(new Error('upstream timeout')));
    let got = Buffer.alloc(0);
    socket.on('connect', () => {
      const size = Buffer.alloc(2);
      size.writeUInt16BE(msg.length);
      socket.write(Buffer.concat([size, msg]));
    });
    socket.on('data', (chunk: Buffer) => {
      got = Buffer.concat([got, chunk]);
      if (got.length >= 2 && got.length >= 2 + got.readUInt16BE(0)) {
        resolve(got.subarray(2, 2 + got.readUInt16BE(0)));
        socket.destroy();
      }
    });
    socket.on('error', reject);
    socket.on('close', () => reject(new Error('upstream closed')));
  });
}
