/**
 * The platform network: one Linux bridge with a private IPv4 network, the host holding
 * its first address (the gateway, where the platform's proxy reaches machines), and one
 * network namespace per machine joined to the bridge by a veth pair.
 *
 * The bridge is made with forwarding off (`net.ipv4.conf.<bridge>.forwarding=0`), so even
 * on a host with `ip_forward=1` a machine's packet for any other address dies at the
 * gateway; the walls (walls.ts) switch it on once they stand, and then decide what a
 * machine reaches: its group, the host's allowed ports, the internet through NAT. IPv6 is
 * disabled on the bridge. Every step checks what exists first, so each call is
 * idempotent and a half-made namespace is finished by calling again.
 */
import { access, writeFile } from 'node:fs/promises';
import { gatewayOf, isMachineIp, networkOf, overlaps, parseCidr } from './cidr.js';
import { CommandError, run } from './exec.js';
import { netnsName, vethName } from './names.js';
import { NetnsSlots } from './netns-slots.js';
import {
  createMachineNamespaces,
  isNamespaceFile,
  keepUserns,
  releaseMachineNamespaces,
  usernsFile,
} from './userns.js';
import { together } from './together.js';
import { removeWalls } from './walls.js';

export { allocateIp } from './cidr.js';

/** The bridge a Network manages. */
export interface NetworkOptions {
  /** Bridge interface name (≤ 15 characters), e.g. `pier0`. */
  bridge: string;
  /** The bridge's IPv4 network, e.g. `10.213.0.0/16`; the gateway is its first address. */
  cidr: string;
}

/** A machine's place on the network, as `createNetns` made it. */
export interface MachineNet {
  /** Network namespace name, for `SandboxSpec.netns`. */
  netns: string;
  /** The user namespace owning it, for `SandboxSpec.userns` (see userns.ts). */
  userns: string;
  ip: string;
  prefix: number;
  gateway: string;
  /** Host end of the veth pair (on the bridge); the machine's end is `eth0`. */
  hostVeth: string;
}

const IFNAME = /^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,14}$/;

const exists = (file: string) =>
  access(file).then(
    () => true,
    () => false,
  );

/** Whether network interface `name` exists in the host's namespace. */
export const linkExists = (name: string) => exists(`/sys/class/net/${name}`);

/** Whether the named network namespace exists. */
export const netnsExists = (name: string) => exists(`/run/netns/${name}`);

/** Runs `argv`, treating a failure as success when `done()` now holds (a racing caller). */
async function runUnless(argv: string[], done: () => Promise<boolean>): Promise<void> {
  try {
    await run(argv);
  } catch (err) {
    if (!(err instanceof CommandError) || !(await done())) throw err;
  }
}

/** The platform bridge and the machines' network namespaces on it. */
export class Network {
  readonly bridge: string;
  readonly cidr: string;
  readonly gateway: string;
  readonly prefix: number;
  /** Namespaces made ahead for the next machines. */
  private readonly slots = new NetnsSlots();

  constructor(opts: NetworkOptions) {
    if (!IFNAME.test(opts.bridge)) throw new Error(`invalid bridge name: ${opts.bridge}`);
    this.bridge = opts.bridge;
    this.cidr = opts.cidr;
    this.prefix = parseCidr(opts.cidr).prefix;
    this.gateway = gatewayOf(opts.cidr);
  }

  /**
   * Makes the bridge (idempotent): created if missing, the gateway address on it, up,
   * forwarding off and IPv6 off. Throws when an interface of that name is not a bridge.
   */
  async ensureBridge(): Promise<void> {
    const name = this.bridge;
    if (!(await linkExists(name))) {
      await this.refuseOverlap();
      await runUnless(['ip', 'link', 'add', 'name', name, 'type', 'bridge'], () =>
        linkExists(name),
      );
    }
    if (!(await exists(`/sys/class/net/${name}/bridge`))) {
      throw new Error(`interface ${name} exists and is not a bridge`);
    }
    await this.refuseOverlap();
    // Before the address goes up, so no packet is ever forwarded from the bridge.
    await writeFile(`/proc/sys/net/ipv4/conf/${name}/forwarding`, '0');
    const ipv6 = `/proc/sys/net/ipv6/conf/${name}/disable_ipv6`;
    if (await exists(ipv6)) await writeFile(ipv6, '1');
    await run(['ip', 'addr', 'replace', `${this.gateway}/${this.prefix}`, 'dev', name]);
    await run(['ip', 'link', 'set', 'dev', name, 'up']);
  }

  /**
   * Throws when another interface has an address in the machines' network: two routes to
   * one network would send the machines' traffic to the wrong one, and they would never
   * answer (a leftover bridge of another installation, or a LAN in that range).
   */
  private async refuseOverlap(): Promise<void> {
    const out = await run(['ip', '-j', '-4', 'addr', 'show']);
    const links = JSON.parse(out || '[]') as {
      ifname: string;
      addr_info?: { local: string; prefixlen: number }[];
    }[];
    for (const link of links) {
      if (link.ifname === this.bridge) continue;
      for (const a of link.addr_info ?? []) {
        if (overlaps(networkOf(a.local, a.prefixlen), this.cidr)) {
          throw new Error(
            `the machines' network ${this.cidr} overlaps ${a.local}/${a.prefixlen} on ${link.ifname}; choose another PIER_MACHINES_CIDR or remove that address`,
          );
        }
      }
    }
  }

  /**
   * Deletes the bridge and its walls (idempotent). Machines' veths on it are detached,
   * not deleted.
   */
  async removeBridge(): Promise<void> {
    const name = this.bridge;
    await removeWalls(name);
    if (await linkExists(name)) {
      await runUnless(['ip', 'link', 'del', 'dev', name], async () => !(await linkExists(name)));
    }
  }

  /**
   * Gives machine `machineId` its network namespace `pier-<id>` (idempotent): `lo` up,
   * `eth0` (a veth whose host end is on the bridge) with `ip` and a default route via the
   * gateway (the runtime sets the namespace's sysctls: oci-config.ts). Calling again with
   * another `ip` moves the machine to it.
   *
   * `joinAfter` is what must stand before the machine is on the bridge (the bridge
   * itself and the walls that hold its record): the namespaces are made meanwhile, and
   * its veth joins the bridge only once that resolves.
   */
  async createNetns(
    machineId: string,
    ip: string,
    joinAfter: Promise<unknown> = Promise.resolve(),
  ): Promise<MachineNet> {
    joinAfter.catch(() => {}); // awaited below, perhaps after it failed
    if (!isMachineIp(this.cidr, ip))
      throw new Error(`${ip} is not a machine address in ${this.cidr}`);
    const ns = netnsName(machineId);
    const veth = vethName(machineId);
    // A namespace made before machines had user namespaces of their own is made anew.
    // So is one whose user namespace is not kept (a fresh start that failed half-way).
    if ((await netnsExists(ns)) && !(await isNamespaceFile(usernsFile(ns))))
      await this.removeNetns(machineId);
    if (!(await netnsExists(ns)) && !(await linkExists(veth))) {
      return this.freshNetns(machineId, ns, veth, ip, joinAfter);
    }
    await joinAfter;
    if (!(await netnsExists(ns))) await createMachineNamespaces(ns);
    if (!(await linkExists(veth))) {
      const add = ['ip', 'link', 'add', veth, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', ns];
      await runUnless(add, () => linkExists(veth));
    }
    await run(['ip', 'neigh', 'flush', 'to', ip, 'dev', this.bridge]); // see freshNetns
    await run(['ip', 'link', 'set', 'dev', veth, 'master', this.bridge, 'up']);
    const inNs = (...args: string[]) => run(['ip', '-n', ns, ...args]);
    await inNs('link', 'set', 'dev', 'lo', 'up');
    const want = `${ip}/${this.prefix}`;
    const have = await this.addresses(ns);
    if (have.length !== 1 || have[0] !== want) {
      await inNs('addr', 'flush', 'dev', 'eth0');
      await inNs('addr', 'add', want, 'dev', 'eth0');
    }
    await inNs('link', 'set', 'dev', 'eth0', 'up');
    await inNs('route', 'replace', 'default', 'via', this.gateway, 'dev', 'eth0');
    return this.machineNet(ns, veth, ip);
  }

  private machineNet(ns: string, veth: string, ip: string): MachineNet {
    const common = { prefix: this.prefix, gateway: this.gateway, hostVeth: veth };
    return { netns: ns, userns: usernsFile(ns), ip, ...common };
  }

  /**
   * The usual case, a machine's first start: nothing of its network exists. It takes a
   * slot (netns-slots.ts: namespaces with their veth, made ahead) and, at once, has the
   * slot's holder give `eth0` its address and route inside, binds the user namespace
   * as a file, and, once the walls stand, keeps the netns (`netns attach`), names the
   * veth for the machine and puts it on the bridge in one `ip -batch` on the host. A
   * spawn of a tool costs milliseconds from a large process, so the steps go in as few
   * as can be, and those that do not wait on each other go together. A start that fails
   * halfway removes what it made; the slot's namespaces end with its holder.
   */
  private async freshNetns(
    machineId: string,
    ns: string,
    veth: string,
    ip: string,
    joinAfter: Promise<unknown>,
  ): Promise<MachineNet> {
    const { holder, tempVeth } = await this.slots.take();
    holder.send([
      `addr add ${ip}/${this.prefix} dev eth0`,
      'link set dev eth0 up',
      `route replace default via ${this.gateway} dev eth0`,
    ]);
    const join = async () => {
      await joinAfter;
      await run(
        ['ip', '-batch', '-'],
        30_000,
        [
          `netns attach ${ns} ${holder.pid}`,
          // The host may still hold the MAC of a machine that had this address before:
          // it would send there, unanswered, until the entry ages out (15–45 s).
          `neigh flush to ${ip} dev ${this.bridge}`,
          `link set dev ${tempVeth} name ${veth}`,
          `link set dev ${veth} master ${this.bridge} up`,
          '',
        ].join('\n'),
      );
    };
    try {
      await together([keepUserns(ns, holder.pid), join()]);
      await holder.finish();
    } catch (err) {
      holder.release();
      await this.removeNetns(machineId).catch(() => {});
      throw err;
    }
    return this.machineNet(ns, veth, ip);
  }

  /** Makes namespaces ahead for the next machines (netns-slots.ts), in the background. */
  warm(): void {
    this.slots.fill();
  }

  /** Lets the namespaces kept ready go (the machines' own are kept). */
  close(): void {
    this.slots.close();
  }

  /** The IPv4 addresses (`a.b.c.d/p`) on the namespace's eth0. */
  private async addresses(ns: string): Promise<string[]> {
    const out = await run(['ip', '-n', ns, '-j', 'addr', 'show', 'dev', 'eth0']);
    const links = JSON.parse(out || '[]') as {
      addr_info?: { family: string; local: string; prefixlen: number }[];
    }[];
    return links
      .flatMap((l) => l.addr_info ?? [])
      .filter((a) => a.family === 'inet')
      .map((a) => `${a.local}/${a.prefixlen}`);
  }

  /**
   * Removes the machine's veth pair and namespace (idempotent). Processes still inside
   * keep the namespace alive without its name until they exit; with the veth gone they
   * have no network.
   */
  async removeNetns(machineId: string): Promise<void> {
    const ns = netnsName(machineId);
    const veth = vethName(machineId);
    if (await linkExists(veth)) {
      await runUnless(['ip', 'link', 'del', 'dev', veth], async () => !(await linkExists(veth)));
    }
    await releaseMachineNamespaces(ns);
  }
}
