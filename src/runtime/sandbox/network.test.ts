/**
 * The platform bridge and machine namespaces, for real, on a bridge and subnet of this
 * test's own (`pier-n<pid>`, 10.214.0.0/16). Skipped where pier cannot manage networks.
 */
import { execFileSync } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { run } from './exec.js';
import { vethName } from './names.js';
import { linkExists, netnsExists, Network } from './network.js';
import { sandboxUnavailable } from './testbed.test-helper.js';
import { isNamespaceFile, usernsFile } from './userns.js';

const unavailable = await sandboxUnavailable();
const bridge = `pier-n${process.pid}`.slice(0, 15);
const ids = ['a', 'b', 'c', 'd', 'e', 'f'].map((x) => `nt${process.pid}${x}`);

/** Runs `argv` inside machine `id`'s network namespace; its stdout. */
const inNs = (id: string, ...argv: string[]) => run(['ip', 'netns', 'exec', `pier-${id}`, ...argv]);

/** The bridge the host end of machine `id`'s veth is on (undefined: none, or no veth). */
async function masterOf(id: string): Promise<string | undefined> {
  if (!(await linkExists(vethName(id)))) return undefined;
  const links = JSON.parse(await run(['ip', '-j', 'link', 'show', 'dev', vethName(id)])) as {
    master?: string;
  }[];
  return links[0]?.master;
}

/** How many mounts sit on `file` (a namespace kept twice would leak the first). */
const mountsOn = async (file: string) =>
  (await readFile('/proc/self/mountinfo', 'utf8'))
    .split('\n')
    .filter((line) => line.split(' ')[4] === file).length;

describe.skipIf(unavailable)(`Network${unavailable ? ` (skipped: ${unavailable})` : ''}`, () => {
  const net = new Network({ bridge, cidr: '10.214.0.0/16' });

  beforeAll(() => net.ensureBridge());
  afterAll(async () => {
    for (const id of ids) await net.removeNetns(id).catch(() => {});
    await net.removeBridge();
  });

  it('makes the bridge once, with the gateway address, forwarding and IPv6 off', async () => {
    await net.ensureBridge(); // again: nothing changes
    const addrs = JSON.parse(await run(['ip', '-j', 'addr', 'show', 'dev', bridge])) as {
      operstate: string;
      addr_info: { family: string; local: string; prefixlen: number }[];
    }[];
    expect(addrs[0]?.addr_info.filter((a) => a.family === 'inet')).toMatchObject([
      { local: '10.214.0.1', prefixlen: 16 },
    ]);
    expect(await readFile(`/proc/sys/net/ipv4/conf/${bridge}/forwarding`, 'utf8')).toBe('0\n');
    expect(await readFile(`/proc/sys/net/ipv6/conf/${bridge}/disable_ipv6`, 'utf8')).toBe('1\n');
    expect(net.gateway).toBe('10.214.0.1');
    // What the kernel would do with a machine's packet for elsewhere: nothing (asked of
    // the routing table, so no packet is sent anywhere to find out).
    await expect(
      run(['ip', 'route', 'get', '192.0.2.1', 'from', '10.214.0.2', 'iif', bridge]),
    ).rejects.toThrow(/No route to host/);
  });

  it('refuses a network that another interface already has an address in', async () => {
    // A leftover bridge (another run, another installation) holding 10.215.0.0/16.
    const other = `pier-o${process.pid}`.slice(0, 15);
    await run(['ip', 'link', 'add', other, 'type', 'bridge']);
    try {
      await run(['ip', 'addr', 'add', '10.215.0.1/16', 'dev', other]);
      const clash = new Network({
        bridge: `pier-c${process.pid}`.slice(0, 15),
        cidr: '10.215.128.0/17',
      });
      await expect(clash.ensureBridge()).rejects.toThrow(/overlaps 10\.215\.0\.1\/16 on pier-o/);
      expect(await linkExists(`pier-c${process.pid}`.slice(0, 15))).toBe(false);
    } finally {
      await run(['ip', 'link', 'del', other]);
    }
  });

  it('refuses to take over an interface that is not a bridge', async () => {
    const name = `pier-x${process.pid}`.slice(0, 15);
    const peer = `pier-y${process.pid}`.slice(0, 15);
    await run(['ip', 'link', 'add', name, 'type', 'veth', 'peer', 'name', peer]);
    try {
      await expect(
        new Network({ bridge: name, cidr: '10.214.0.0/16' }).ensureBridge(),
      ).rejects.toThrow(/not a bridge/);
    } finally {
      await run(['ip', 'link', 'del', name]);
    }
  });

  it('gives a machine lo, eth0 with its address and a default route via the gateway', async () => {
    const [id] = ids as [string];
    const made = await net.createNetns(id, '10.214.0.2');
    expect(made).toEqual({
      netns: `pier-${id}`,
      ip: '10.214.0.2',
      prefix: 16,
      gateway: '10.214.0.1',
      hostVeth: vethName(id),
      userns: `/run/pier/userns/pier-${id}`,
    });
    const again = await net.createNetns(id, '10.214.0.2'); // idempotent
    expect(again).toEqual(made);
    const links = JSON.parse(await run(['ip', '-n', made.netns, '-j', 'addr', 'show'])) as {
      ifname: string;
      operstate: string;
      addr_info: { family: string; local: string }[];
    }[];
    expect(links.map((l) => l.ifname).sort()).toEqual(['eth0', 'lo']);
    const eth0 = links.find((l) => l.ifname === 'eth0');
    expect(eth0?.addr_info.filter((a) => a.family === 'inet').map((a) => a.local)).toEqual([
      '10.214.0.2',
    ]);
    const routes = await run(['ip', '-n', made.netns, 'route', 'show', 'default']);
    expect(routes).toContain('default via 10.214.0.1 dev eth0');
    const master = JSON.parse(await run(['ip', '-j', 'link', 'show', 'dev', made.hostVeth])) as {
      master?: string;
    }[];
    expect(master[0]?.master).toBe(bridge);
    // The gateway answers; nothing beyond the bridge is routed (no forwarding, no NAT).
    await inNs(id, '/bin/busybox', 'ping', '-c', '1', '-W', '2', '10.214.0.1');
  });

  it('lets two machines reach each other on the bridge, and moves a machine to a new address', async () => {
    const [a, b] = ids as [string, string];
    await net.createNetns(b, '10.214.0.3');
    await inNs(a, '/bin/busybox', 'ping', '-c', '1', '-W', '2', '10.214.0.3');
    await net.createNetns(b, '10.214.0.9');
    const addrs = await run(['ip', '-n', `pier-${b}`, '-4', '-o', 'addr', 'show', 'dev', 'eth0']);
    expect(addrs).toContain('10.214.0.9/16');
    expect(addrs).not.toContain('10.214.0.3');
  });

  it('gives an address a destroyed machine had to a new one that the host reaches at once', async () => {
    const [, , , , gone, next] = ids as [string, string, string, string, string, string];
    await net.createNetns(gone, '10.214.0.20');
    // The host now knows the first machine's MAC for the address (a reachable entry).
    await run(['/bin/busybox', 'ping', '-c', '1', '-W', '2', '10.214.0.20']);
    await net.removeNetns(gone);
    await net.createNetns(next, '10.214.0.20');
    // Without the entry flushed, the host would send to the old MAC for 15–45 s.
    await run(['/bin/busybox', 'ping', '-c', '1', '-W', '2', '10.214.0.20']);
  });

  it('refuses addresses outside the network or reserved in it', async () => {
    await expect(net.createNetns('nope', '10.214.0.1')).rejects.toThrow(/not a machine address/);
    await expect(net.createNetns('nope', '10.99.0.2')).rejects.toThrow(/not a machine address/);
  });

  it('removes namespace and veth, idempotently', async () => {
    const [id] = ids as [string];
    await net.removeNetns(id);
    await net.removeNetns(id);
    expect(await netnsExists(`pier-${id}`)).toBe(false);
    expect(await linkExists(vethName(id))).toBe(false);
    // A half-made machine (namespace without veth) is completed by creating again.
    execFileSync('ip', ['netns', 'add', `pier-${id}`]);
    await net.createNetns(id, '10.214.0.2');
    expect(await linkExists(vethName(id))).toBe(true);
  });

  it('keeps a machine off the bridge until what it waits for stands, making its namespaces meanwhile', async () => {
    const id = ids[2] as string;
    let open = () => {};
    const walls = new Promise<void>((resolve) => (open = resolve));
    const making = net.createNetns(id, '10.214.0.4', walls);
    const deadline = Date.now() + 10_000;
    while (!(await isNamespaceFile(usernsFile(`pier-${id}`)))) {
      if (Date.now() > deadline) throw new Error('the user namespace was not made meanwhile');
      await new Promise((r) => setTimeout(r, 5));
    }
    await new Promise((r) => setTimeout(r, 50));
    expect(await masterOf(id)).toBeUndefined();
    open();
    await making;
    expect(await masterOf(id)).toBe(bridge);
  });

  it('leaves nothing on the bridge when what it waits for fails, and a retry makes it whole', async () => {
    const id = ids[3] as string;
    const userns = usernsFile(`pier-${id}`);
    await expect(
      net.createNetns(id, '10.214.0.5', Promise.reject(new Error('walls failed'))),
    ).rejects.toThrow(/walls failed/);
    expect(await linkExists(vethName(id))).toBe(false);
    expect(await netnsExists(`pier-${id}`)).toBe(false);
    await net.createNetns(id, '10.214.0.5');
    expect(await masterOf(id)).toBe(bridge);
    // The user namespace left by the failed try was replaced, not stacked on.
    expect(await mountsOn(userns)).toBe(1);
    const map = await run(['nsenter', `--user=${userns}`, '--', 'cat', '/proc/self/uid_map']);
    expect(map.trim().split(/\s+/)).toEqual(['0', '200000', '65536']);
    expect(await isNamespaceFile(userns)).toBe(true);
    await net.removeNetns(id);
    expect(await isNamespaceFile(userns)).toBe(false);
    expect(await mountsOn(userns)).toBe(0);
  });
});
