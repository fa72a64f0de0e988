/**
 * The walls of one machines network as an nftables ruleset: a pure function of what the
 * runtime knows (its machines, their groups, egress and host ports), so applying it is
 * one atomic `nft -f -` that replaces the whole previous state, and no stale element can
 * survive a crash or an address handed to another machine. See walls.ts for applying it
 * and docs/architecture.md ("Isolation model") for why this shape.
 *
 * Two tables, both named `pier_<bridge>`:
 * - `bridge` family: frames between two machines never reach the IP layer (they are
 *   switched by the bridge), so the wall between groups sits on the bridge's forward
 *   hook: a source address jumps to its group's chain, which accepts only destinations
 *   of the same group. A frame whose source address is not the one of its port is dropped
 *   before anything else (no machine can speak for another).
 * - `inet` family: what machines send to the host (input: replies, and the allowed host
 *   ports; everything else dropped), what the host routes for them (forward: egress by
 *   machine, replies back in, nothing else in) and the NAT out (postrouting masquerade).
 *   Its forward chain applies the same group walls to packets from the bridge to the
 *   bridge: those are frames between machines on a host where br_netfilter passes
 *   bridged IPv4 through the IP hooks (`bridge-nf-call-iptables=1`, as on this one), or a
 *   packet hairpinned through the gateway; either way the walls hold.
 */
import { ipToInt, networkOf, parseCidr } from './cidr.js';
import { vethName } from './names.js';

/** What one machine may reach beyond its group. */
export type WallsEgress =
  /** Public addresses (and private ones where the plan allows them). */
  | { mode: 'open' }
  /** Nothing; replies to connections made to it still flow. */
  | { mode: 'deny-all' }
  /** Only these IPv4 networks (the allowlist's CIDRs and its domains' current addresses). */
  | { mode: 'allowlist'; cidrs: string[] };

/** One machine as the walls see it. */
export interface WallsMachine {
  id: string;
  ip: string;
  /** Machines of one group reach each other; no machine reaches another group's. */
  group: string;
  egress: WallsEgress;
  /** TCP ports on the host this machine may connect to (e.g. its attachments' fronts). */
  hostPorts: number[];
}

/** Everything the ruleset is made from. */
export interface WallsPlan {
  bridge: string;
  /** The machines' network, e.g. `10.213.0.0/16`. */
  cidr: string;
  /** `PIER_ALLOW_PRIVATE_TARGETS`: machines may reach private, loopback-range… networks. */
  allowPrivate: boolean;
  /** The ranges machines never reach unless `allowPrivate` (outbound-guard's list). */
  refusedRanges: readonly string[];
  machines: WallsMachine[];
  /** The machines' resolver (machine-dns.ts) on this address: every machine may ask it. */
  resolver?: string;
}

/** The name of both tables of `bridge`; `pier_` marks them as ours for the sweep. */
export const wallsTable = (bridge: string) => `pier_${bridge}`;

/** Parses `a.b.c.d[/p]` into the network it names (host bits cleared); undefined if not IPv4. */
export function ipv4Network(entry: string): string | undefined {
  const [ip, bits, extra] = entry.trim().split('/');
  if (ip === undefined || extra !== undefined) return undefined;
  const prefix = bits === undefined ? 32 : /^\d{1,2}$/.test(bits) ? Number(bits) : NaN;
  if (!(prefix >= 0 && prefix <= 32)) return undefined;
  try {
    ipToInt(ip);
  } catch {
    return undefined;
  }
  return networkOf(ip, prefix);
}

const list = (items: string[]) => (items.length ? ` elements = { ${items.join(', ')} }` : '');

/** Throws unless `s` is safe to write into the ruleset unquoted (an interface name). */
function ifname(s: string): string {
  if (!/^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,14}$/.test(s)) throw new Error(`invalid interface: ${s}`);
  return s;
}

/** An IPv4 address, checked, for the ruleset. */
function addr(ip: string): string {
  ipToInt(ip);
  return ip;
}

/** The ruleset text for `nft -f -`: both tables made (if missing), dropped and made anew. */
export function wallsRuleset(plan: WallsPlan): string {
  const br = ifname(plan.bridge);
  const table = wallsTable(br);
  parseCidr(plan.cidr);
  const groups = [...new Set(plan.machines.map((m) => m.group))];
  const groupOf = new Map(groups.map((g, i) => [g, i]));
  const machines = plan.machines.map((m) => ({ ...m, ip: addr(m.ip) }));

  // The same group sets and chains in both tables (see the forward chains).
  const groupSets = groups.map((g, i) => {
    const ips = machines.filter((m) => m.group === g).map((m) => m.ip);
    return [
      `  set m${i} { type ipv4_addr;${list(ips)} }`,
      `  chain g${i} { ip daddr @m${i} accept; drop; }`,
    ].join('\n');
  });
  const groupMap = machines.map((m) => `${m.ip} : jump g${groupOf.get(m.group)}`);
  const ports = machines.map((m) => `"${vethName(m.id)}" . ${m.ip}`);
  const veths = machines.map((m) => `"${vethName(m.id)}"`);

  const allowSets: string[] = [];
  const egressMap = machines.map((m, i) => {
    if (m.egress.mode === 'open') return `${m.ip} : accept`;
    if (m.egress.mode === 'deny-all') return `${m.ip} : drop`;
    const nets = [...new Set(m.egress.cidrs.map(ipv4Network).filter((c) => c !== undefined))];
    allowSets.push(
      `  set a${i} { type ipv4_addr; flags interval; auto-merge;${list(nets)} }`,
      `  chain e${i} { ip daddr @a${i} accept; drop; }`,
    );
    return `${m.ip} : jump e${i}`;
  });
  const walls = [
    ...groupSets,
    `  map group { type ipv4_addr : verdict;${list(groupMap)} }`,
    '  chain walls { ip saddr vmap @group; drop; }',
  ].join('\n');
  const hostAccess = machines.flatMap((m) =>
    [...new Set(m.hostPorts)].map((p) => `${m.ip} . ${port(p)}`),
  );
  const resolver = plan.resolver
    ? `    ip daddr ${addr(plan.resolver)} meta l4proto { udp, tcp } th dport 53 accept\n`
    : '';
  const refused = plan.allowPrivate ? [] : plan.refusedRanges.map((r) => ipv4Network(r) ?? r);

  return `table bridge ${table} {}
delete table bridge ${table}
table bridge ${table} {
  comment "pier: walls between the groups of machines on bridge ${br}"
  set veths { type ifname;${list(veths)} }
  set ports { type ifname . ipv4_addr;${list(ports)} }
${walls}
  chain prerouting {
    type filter hook prerouting priority -200; policy accept;
    iifname != @veths accept
    ether type ip iifname . ip saddr != @ports drop
    ether type != { ip, arp } drop
  }
  chain forward {
    type filter hook forward priority 0; policy accept;
    iifname != @veths accept
    ether type arp accept
    ether type ip jump walls
    drop
  }
}
table inet ${table} {}
delete table inet ${table}
table inet ${table} {
  comment "pier: what machines on bridge ${br} reach on the host and beyond"
  set refused { type ipv4_addr; flags interval; auto-merge;${list(refused)} }
  set host_access { type ipv4_addr . inet_service;${list(hostAccess)} }
${walls}
${allowSets.join('\n')}
  map egress { type ipv4_addr : verdict;${list(egressMap)} }
  chain input {
    type filter hook input priority 0; policy accept;
    iifname "${br}" jump from_machines
  }
  chain from_machines {
    ct state established,related accept
    ip saddr . tcp dport @host_access accept
${resolver}    drop
  }
  chain forward {
    type filter hook forward priority 0; policy accept;
    iifname "${br}" oifname "${br}" jump walls
    oifname "${br}" ct state established,related accept
    oifname "${br}" drop
    iifname "${br}" jump egress
  }
  chain egress {
    ct state established,related accept
    ip daddr @refused drop
    ip saddr vmap @egress
    drop
  }
  chain postrouting {
    type nat hook postrouting priority srcnat; policy accept;
    ip saddr ${plan.cidr} oifname != "${br}" masquerade
  }
}
`;
}

function port(p: number): number {
  if (!Number.isInteger(p) || p < 1 || p > 65535) throw new Error(`invalid port: ${p}`);
  return p;
}

/** The commands that remove both tables of `bridge` (each fails if that table is absent). */
export function dropWallsRuleset(bridge: string): string {
  const table = wallsTable(ifname(bridge));
  return `table bridge ${table} {}\ndelete table bridge ${table}\ntable inet ${table} {}\ndelete table inet ${table}\n`;
}
