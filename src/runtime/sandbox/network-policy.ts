/**
 * A machine's network policy (spec 4.6), enforced on the host side of its veth pair,
 * where nothing inside the machine can reach it (root in the machine's user namespace
 * owns its netns, so rules inside it could be flushed by the machine itself):
 *
 * - **Bandwidth** (`bandwidthMbit`), both directions with `tc`: a token bucket (`tbf`) on
 *   the host veth's egress shapes traffic *to* the machine; traffic *from* it arrives as
 *   the veth's ingress, which a `u32` filter redirects (`mirred`) to an `ifb` device of
 *   the machine's own (`pi…`), shaped by a second `tbf`. (An ingress policer would be
 *   simpler, but kernels without `act_police`, like this project's test hosts, refuse
 *   it; `ifb` and `mirred` are everywhere.)
 * - **New connections per minute**, with nftables: a table `ip pp_<veth>` holds one
 *   named limit shared by three chains: `output` (the host, where the proxy runs, to the
 *   machine), `forward` (the machine to and from anywhere else) and `input` (the machine
 *   to the host). A new connection over the limit is refused (`reject`, the client sees
 *   ECONNREFUSED). The limit is a token bucket of `n` per minute holding `n`, so `n`
 *   connections may come at once, the next only as the bucket refills.
 *
 * Every call states the whole policy (idempotent); child processes get argument arrays.
 */
import { access, readdir, readFile } from 'node:fs/promises';
import { CommandError, run } from './exec.js';
import { vethName } from './names.js';

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

/** The nftables document of a machine's connection limit (one atomic `nft -f -`). */
export function connectionRuleset(veth: string, ip: string, perMinute: number | null): string {
  const table = tableOf(veth);
  // `add` first so that `delete` never fails on a missing table: the batch replaces it.
  const lines = [`add table ip ${table}`, `delete table ip ${table}`];
  if (perMinute === null) return `${lines.join('\n')}\n`;
  const rule = (match: string) => `    ${match} ct state new limit name "conns" counter reject`;
  lines.push(
    `table ip ${table} {`,
    `  limit conns { rate over ${perMinute}/minute burst ${perMinute} packets }`,
    '  chain output {',
    '    type filter hook output priority 10; policy accept;',
    rule(`ip daddr ${ip}`),
    '  }',
    '  chain forward {',
    '    type filter hook forward priority 10; policy accept;',
    rule(`ip daddr ${ip}`),
    rule(`ip saddr ${ip}`),
    '  }',
    '  chain input {',
    '    type filter hook input priority 10; policy accept;',
    rule(`ip saddr ${ip}`),
    '  }',
    '}',
  );
  return `${lines.join('\n')}\n`;
}

/** Applies `limits` to machine `machineId` at `ip` (its veth must exist). */
export async function applyNetworkPolicy(
  machineId: string,
  ip: string,
  limits: NetworkLimits,
): Promise<void> {
  if (!/^\d{1,3}(\.\d{1,3}){3}$/.test(ip)) throw new Error(`not an IPv4 address: ${ip}`);
  const veth = vethName(machineId);
  await applyBandwidth(veth, limits.bandwidthMbit);
  await run(
    ['nft', '-f', '-'],
    30_000,
    connectionRuleset(veth, ip, limits.newConnectionsPerMinute),
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

/** Removes a machine's policy (idempotent): qdiscs, its ifb device, its table. */
export async function removeNetworkPolicy(machineId: string): Promise<void> {
  const veth = vethName(machineId);
  await removeBandwidth(veth);
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
