/**
 * IPv4 arithmetic for the platform bridge: a private network such as 10.213.0.0/16 whose
 * first address is the gateway (the host's address on the bridge) and whose other
 * addresses go to machines.
 */

/** A parsed IPv4 network. */
export interface Cidr {
  /** The network address as an unsigned 32-bit number. */
  network: number;
  prefix: number;
}

/** `a.b.c.d` as an unsigned 32-bit number; throws for anything else. */
export function ipToInt(ip: string): number {
  const parts = ip.split('.');
  if (parts.length !== 4 || !parts.every((p) => /^(0|[1-9]\d{0,2})$/.test(p) && Number(p) < 256)) {
    throw new Error(`invalid IPv4 address: ${JSON.stringify(ip)}`);
  }
  return parts.reduce((n, p) => n * 256 + Number(p), 0);
}

/** An unsigned 32-bit number as `a.b.c.d`. */
export function intToIp(n: number): string {
  return [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join('.');
}

/**
 * Parses `a.b.c.d/p`. The address must be the network's own (no host bits) and the
 * prefix between 8 and 30, so there is room for a gateway and at least one machine.
 */
export function parseCidr(cidr: string): Cidr {
  const [ip, bits, extra] = cidr.split('/');
  const prefix = Number(bits);
  if (ip === undefined || extra !== undefined || !/^\d+$/.test(bits ?? '')) {
    throw new Error(`invalid CIDR: ${JSON.stringify(cidr)}`);
  }
  if (prefix < 8 || prefix > 30) throw new Error(`CIDR prefix must be 8..30: ${cidr}`);
  const network = ipToInt(ip);
  if (network % size(prefix) !== 0) throw new Error(`CIDR has host bits set: ${cidr}`);
  return { network, prefix };
}

function size(prefix: number): number {
  return 2 ** (32 - prefix);
}

/** The gateway of `cidr`: its first host address. */
export function gatewayOf(cidr: string): string {
  return intToIp(parseCidr(cidr).network + 1);
}

/**
 * Whether `ip` may be given to a machine in `cidr`: inside it, and neither the network
 * address, the gateway nor the broadcast address.
 */
export function isMachineIp(cidr: string, ip: string): boolean {
  const { network, prefix } = parseCidr(cidr);
  const n = ipToInt(ip);
  return n >= network + 2 && n < network + size(prefix) - 1;
}

/**
 * The lowest machine address of `cidr` not in `taken` (dotted strings). Throws when the
 * network is full. Lowest-first keeps addresses stable and easy to read in tests.
 */
export function allocateIp(cidr: string, taken: ReadonlySet<string>): string {
  const { network, prefix } = parseCidr(cidr);
  const last = network + size(prefix) - 2;
  for (let n = network + 2; n <= last; n++) {
    const ip = intToIp(n);
    if (!taken.has(ip)) return ip;
  }
  throw new Error(`no free address left in ${cidr}`);
}

/** Whether two networks share any address. */
export function overlaps(a: string, b: string): boolean {
  const x = parseCidr(a);
  const y = parseCidr(b);
  const xEnd = x.network + size(x.prefix);
  const yEnd = y.network + size(y.prefix);
  return x.network < yEnd && y.network < xEnd;
}

/** The network `a.b.c.d/p` that an interface address with that prefix belongs to. */
export function networkOf(ip: string, prefix: number): string {
  const n = ipToInt(ip);
  return `${intToIp(n - (n % size(prefix)))}/${prefix}`;
}
