/**
 * A machine's network policy (spec 4.6):
 *
 * - **Bandwidth** (`bandwidthMbit`), both directions with `tc` on the host side of the
 *   machine's veth pair, where nothing inside the machine can reach it: a token bucket
 *   (`tbf`) on the host veth's egress shapes traffic *to* the machine; traffic *from* it
 *   arrives as the veth's ingress, which a `u32` filter redirects (`mirred`) to an `ifb`
 *   device of the machine's own (`pi…`), shaped by a second `tbf`. (An ingress policer
 *   would be simpler, but kernels without `act_police`, like this project's test hosts,
 *   refuse it; `ifb` and `mirred` are everywhere.)
 * - **New connections per minute**, with nftables, as a token bucket of `n` per minute
 *   holding `n` (so `n` connections may come at once, the next only as the bucket
 *   refills), shared by connections into the machine and out of it. Over the limit a new
 *   connection is refused (`reject`: the client sees ECONNREFUSED). Where it sits:
 *   - `netns` (runc): a table `inet pier_policy` inside the machine's own network
 *     namespace (`input` and `output` hooks, loopback exempt). Every new connection into
 *     the machine passes there, whatever its source: the proxy, the host, and other
 *     machines on the same bridge, whose frames the host's IP hooks never see unless the
 *     host passes bridged traffic through them (br_netfilter). The machine cannot remove
 *     it: its netns belongs to its user namespace, but none of its processes holds
 *     CAP_NET_ADMIN (spec.ts ROOT_CAPS), so nft inside it is refused.
 *   - `host` (runsc): gVisor's netstack handles the machine's packets itself (read from
 *     the veth with a packet socket), so nothing filters inside its netns; a table
 *     `ip pp_<veth>` on the host counts the machine's address in the `output` (the host
 *     and its proxy to the machine), `forward` (routed to or from anywhere else, and
 *     bridged traffic where br_netfilter passes it to the IP hooks) and `input` (the
 *     machine to the host) hooks.
 *
 * Every call states the whole policy (idempotent); child processes get argument arrays.
 */
import { access, readdir, readFile } from 'node:fs/promises';
import { CommandError, run } from './exec.js';
import { netnsName, vethName } from './names.js';
import { netnsExists } from './network.js';

export interface NetworkLimits {
  bandwidthMbit: number | null;
  newConnectionsPerMinute: number | null;
}

const tableOf = (veth: string) => `pp_${veth}`;

/** Runs `argv`, ignoring a failure (removing what is not there). */
const tryRun = (argv: string[]) =>
  run(argv).catch((err: unknown) => {
    if (!(err instanceof CommandError)) throw err;
    return '';
  });

/** Bytes a token bucket may hold: 20 ms at the rate, at least a few full frames. */
function burstBytes(mbit: number): number {
  return Math.max(16 * 1024, Math.floor((mbit * 1_000_000) / 8 / 50));
}

/** The machine's ifb device: `pi` and the same hash as its veth (`pv…`). */
const ifbOf = (veth: string) => `pi${veth.slice(2)}`;

async function removeBandwidth(veth: string): Promise<void> {
  await tryRun(['tc', 'qdisc', 'del', 'dev', veth, 'root']);
  await tryRun(['tc', 'qdisc', 'del', 'dev', veth, 'ingress']);
  await tryRun(['ip', 'link', 'del', 'dev', ifbOf(veth)]);
}

async function applyBandwidth(veth: string, mbit: number | null): Promise<void> {
  await removeBandwidth(veth);
  if (mbit === null) return;
  const ifb = ifbOf(veth);
  const tbf = ['tbf', 'rate', `${mbit}mbit`, 'burst', String(burstBytes(mbit)), 'latency', '100ms'];
  await run(['tc', 'qdisc', 'add', 'dev', veth, 'root', ...tbf]);
  await run(['ip', 'link', 'add', 'name', ifb, 'type', 'ifb']);
  await run(['ip', 'link', 'set', 'dev', ifb, 'up']);
  await run(['tc', 'qdisc', 'add', 'dev', ifb, 'root', ...tbf]);
  await run(['tc', 'qdisc', 'add', 'dev', veth, 'handle', 'ffff:', 'ingress']);
  await run([
    'tc',
    'filter',
    'add',
    'dev',
    veth,
    'parent',
    'ffff:',
    'protocol',
    'all',
    'prio',
    '1',
    'u32',
    'match',
    'u32',
    '0',
    '0',
    'action',
    'mirred',
    'egress',
    'redirect',
    'dev',
    ifb,
  ]);
}

/** Where a machine's connection limit is enforced: see the module comment. */
export type LimitPlace = 'netns' | 'host';

/** The token bucket every chain of a connection limit shares. */
const bucket = (perMinute: number) =>
  `  limit conns { rate over ${perMinute}/minute burst ${perMinute} packets }`;

/** A rule refusing new connections over the limit; `match` narrows it (an address). */
const limitRule = (match?: string) =>
  `    ${match ? `${match} ` : ''}ct state new limit name "conns" counter reject`;

/** The nftables document of a machine's connection limit on the host (one atomic `nft -f -`). */
export function connectionRuleset(veth: string, ip: string, perMinute: number | null): string {
  const table = tableOf(veth);
  // `add` first so that `delete` never fails on a missing table: the batch replaces it.
  const lines = [`add table ip ${table}`, `delete table ip ${table}`];
  if (perMinute === null) return `${lines.join('\n')}\n`;
  lines.push(
    `table ip ${table} {`,
    bucket(perMinute),
    '  chain output {',
    '    type filter hook output priority 10; policy accept;',
    limitRule(`ip daddr ${ip}`),
    '  }',
    '  chain forward {',
    '    type filter hook forward priority 10; policy accept;',
    limitRule(`ip daddr ${ip}`),
    limitRule(`ip saddr ${ip}`),
    '  }',
    '  chain input {',
    '    type filter hook input priority 10; policy accept;',
    limitRule(`ip saddr ${ip}`),
    '  }',
    '}',
  );
  return `${lines.join('\n')}\n`;
}

/** The table of the connection limit inside a machine's netns. */
export const NETNS_TABLE = 'pier_policy';

/**
 * The nftables document of the connection limit inside a machine's netns: every new
 * connection into it (`input`) or out of it (`output`), its own loopback excepted.
 */
export function netnsConnectionRuleset(perMinute: number | null): string {
  const lines = [`add table inet ${NETNS_TABLE}`, `delete table inet ${NETNS_TABLE}`];
  if (perMinute === null) return `${lines.join('\n')}\n`;
  lines.push(
    `table inet ${NETNS_TABLE} {`,
    bucket(perMinute),
    '  chain input {',
    '    type filter hook input priority 10; policy accept;',
    '    iifname "lo" accept',
    limitRule(),
    '  }',
    '  chain output {',
    '    type filter hook output priority 10; policy accept;',
    '    oifname "lo" accept',
    limitRule(),
    '  }',
    '}',
  );
  return `${lines.join('\n')}\n`;
}

/** `nft -f -` inside the machine's network namespace (a named one under /run/netns). */
const nftInNetns = (machineId: string, doc: string) =>
  run(['nsenter', `--net=/run/netns/${netnsName(machineId)}`, 'nft', '-f', '-'], 30_000, doc);

/**
 * Applies `limits` to machine `machineId` at `ip` (its veth and netns must exist), the
 * connection limit at `place`; the other place's limit is removed.
 */
export async function applyNetworkPolicy(
  machineId: string,
  ip: string,
  limits: NetworkLimits,
  place: LimitPlace,
): Promise<void> {
  if (!/^\d{1,3}(\.\d{1,3}){3}$/.test(ip)) throw new Error(`not an IPv4 address: ${ip}`);
  const veth = vethName(machineId);
  const perMinute = limits.newConnectionsPerMinute;
  await applyBandwidth(veth, limits.bandwidthMbit);
  await nftInNetns(machineId, netnsConnectionRuleset(place === 'netns' ? perMinute : null));
  await run(
    ['nft', '-f', '-'],
    30_000,
    connectionRuleset(veth, ip, place === 'host' ? perMinute : null),
  );
}

/**
 * The interface index of the machine's host veth, or undefined while it has none. A
 * new index means a new veth (a restart), which carries none of the old qdiscs.
 */
export async function vethIndex(machineId: string): Promise<string | undefined> {
  const text = await readFile(`/sys/class/net/${vethName(machineId)}/ifindex`, 'utf8').catch(
    () => undefined,
  );
  return text?.trim();
}

/**
 * Removes a machine's policy (idempotent): qdiscs, its ifb device, its tables (the one in
 * its netns only while that netns exists; it goes with it anyway).
 */
export async function removeNetworkPolicy(machineId: string): Promise<void> {
  const veth = vethName(machineId);
  await removeBandwidth(veth);
  if (await netnsExists(netnsName(machineId)))
    await nftInNetns(machineId, netnsConnectionRuleset(null));
  await run(['nft', '-f', '-'], 30_000, connectionRuleset(veth, '0.0.0.0', null));
}

/** A machine's veth (names.ts vethName): `pv` and 11 hex digits; never the bridge. */
const VETH = /^pv[0-9a-f]{11}$/;

async function isIfb(dev: string): Promise<boolean> {
  const out = await tryRun(['ip', '-j', '-d', 'link', 'show', 'dev', dev]);
  const links = JSON.parse(out || '[]') as { linkinfo?: { info_kind?: string } }[];
  return links[0]?.linkinfo?.info_kind === 'ifb';
}

const exists = (dev: string) =>
  access(`/sys/class/net/${dev}`).then(
    () => true,
    () => false,
  );

/**
 * Removes the policies of machines whose veth is gone: `pp_<veth>` tables and `pi…` ifb
 * devices that a crashed pier (or test run) left behind when the machine's netns went
 * away with it. A live veth's policy is never touched, so other pier processes on this
 * host keep theirs. Answers the veths swept.
 */
export async function sweepNetworkPolicies(): Promise<string[]> {
  const gone = new Set<string>();
  const out = await tryRun(['nft', '-j', 'list', 'tables', 'ip']);
  const tables = (JSON.parse(out || '{}') as { nftables?: { table?: { name: string } }[] })
    .nftables;
  for (const t of tables ?? []) {
    const veth = t.table?.name.startsWith('pp_pv') ? t.table.name.slice(3) : undefined;
    if (veth && VETH.test(veth) && !(await exists(veth))) {
      await tryRun(['nft', 'delete', 'table', 'ip', tableOf(veth)]);
      gone.add(veth);
    }
  }
  for (const dev of await readdir('/sys/class/net').catch(() => [] as string[])) {
    const veth = `pv${dev.slice(2)}`;
    if (dev.startsWith('pi') && VETH.test(veth) && (await isIfb(dev)) && !(await exists(veth))) {
      await tryRun(['ip', 'link', 'del', 'dev', dev]);
      gone.add(veth);
    }
  }
  return [...gone];
}
