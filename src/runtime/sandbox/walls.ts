/**
 * Applying the walls of a machines network (walls-ruleset.ts) to this host's nftables:
 * one atomic batch on `nft -f -` per change, so the kernel holds either the old walls or
 * the new ones, never a half; removing them with the bridge; and sweeping the tables of
 * bridges that no longer exist (a crashed run, a test killed mid-way).
 *
 * Routing for machines (the NAT out) needs IPv4 forwarding on the bridge and on the
 * interfaces of the host's default routes (replies come in there). Only those
 * interfaces are switched on, never `net.ipv4.ip_forward` (which would switch on every
 * interface of the host), and the bridge's only once its walls stand: until then no
 * packet of a machine is routed anywhere.
 */
import { access, readFile, writeFile } from 'node:fs/promises';
import { CommandError, run } from './exec.js';
import { together } from './together.js';
import { dropWallsRuleset, wallsRuleset, wallsTable, type WallsPlan } from './walls-ruleset.js';

const forwarding = (ifname: string) => `/proc/sys/net/ipv4/conf/${ifname}/forwarding`;

async function enableForwarding(ifname: string): Promise<void> {
  const file = forwarding(ifname);
  const now = await readFile(file, 'utf8').catch(() => undefined);
  if (now !== undefined && now.trim() !== '1') await writeFile(file, '1');
}

/** How long the uplinks found are trusted: every rewrite (each machine start) would spawn `ip`. */
const UPLINKS_TTL_MS = 10_000;
let lastUplinks: { at: number; devs: Promise<string[]> } | undefined;

/** The interfaces of the host's IPv4 default routes (where the internet is). */
function uplinks(): Promise<string[]> {
  if (lastUplinks && Date.now() - lastUplinks.at < UPLINKS_TTL_MS) return lastUplinks.devs;
  const devs = run(['ip', '-j', '-4', 'route', 'show', 'default']).then((out) => {
    const routes = JSON.parse(out || '[]') as { dev?: string }[];
    return [...new Set(routes.map((r) => r.dev).filter((d): d is string => !!d))];
  });
  lastUplinks = { at: Date.now(), devs };
  devs.catch(() => (lastUplinks = undefined));
  return devs;
}

/**
 * Replaces the walls of `plan.bridge` with `plan`'s, then lets machines be routed. The
 * uplinks are looked up while nft works (it only reads), so a rewrite costs one spawn's
 * wait rather than two.
 */
export async function applyWalls(plan: WallsPlan): Promise<void> {
  const [, devs] = await together([run(['nft', '-f', '-'], 30_000, wallsRuleset(plan)), uplinks()]);
  for (const dev of [plan.bridge, ...devs]) await enableForwarding(dev);
}

/** Removes the walls of `bridge` (idempotent); its forwarding goes off first. */
export async function removeWalls(bridge: string): Promise<void> {
  const exists = await access(forwarding(bridge)).then(
    () => true,
    () => false,
  );
  if (exists) await writeFile(forwarding(bridge), '0');
  await run(['nft', '-f', '-'], 30_000, dropWallsRuleset(bridge));
}

/**
 * Removes the walls of bridges that are gone: tables named `pier_<bridge>` (ours, see
 * wallsTable) whose bridge no longer exists. A live bridge's tables are never touched,
 * so concurrent pier processes (test beds) on other bridges keep theirs.
 */
export async function sweepWalls(): Promise<string[]> {
  const out = await run(['nft', '-j', 'list', 'tables']).catch((err: unknown) => {
    if (err instanceof CommandError) return '{}';
    throw err;
  });
  const tables = (JSON.parse(out) as { nftables?: { table?: { family: string; name: string } }[] })
    .nftables;
  const bridges = new Set<string>();
  for (const t of tables ?? []) {
    const name = t.table?.name;
    if (!name?.startsWith('pier_')) continue;
    const bridge = name.slice('pier_'.length);
    if (wallsTable(bridge) !== name || !/^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,14}$/.test(bridge)) continue;
    const alive = await access(`/sys/class/net/${bridge}`).then(
      () => true,
      () => false,
    );
    if (!alive) bridges.add(bridge);
  }
  for (const bridge of bridges) await run(['nft', '-f', '-'], 30_000, dropWallsRuleset(bridge));
  return [...bridges];
}
