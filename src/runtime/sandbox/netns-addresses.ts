/**
 * What runsc takes from a machine's network namespace and does not give back. With
 * `--network=sandbox` it moves the veth's IPv4 addresses into gVisor's own stack and
 * deletes them from the namespace (the host kernel must not answer for them), and the
 * kernel then drops the routes through them. The namespace outlives the sandbox (a
 * machine restarts in it), so the keeper saves both before `runsc run` and puts them
 * back once the sandbox ended; without that a restarted machine comes up with loopback
 * only. Synchronous: the keeper calls it on its way out.
 */
import { execFileSync } from 'node:child_process';
import path from 'node:path';

/** The addresses and routes of a namespace, as `ip` re-adds them. */
export interface NetnsAddresses {
  addrs: { dev: string; cidr: string }[];
  routes: { dst: string; via?: string; dev: string }[];
}

const PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

function ip(netnsFile: string, args: string[]): string {
  return execFileSync('ip', ['-n', path.basename(netnsFile), ...args], {
    encoding: 'utf8',
    env: { PATH },
    timeout: 10_000,
  });
}

/** The IPv4 addresses (loopback aside) and routes of the namespace at `netnsFile`. */
export function saveAddresses(netnsFile: string): NetnsAddresses {
  const links = JSON.parse(ip(netnsFile, ['-j', '-4', 'addr', 'show'])) as {
    ifname: string;
    addr_info?: { local: string; prefixlen: number }[];
  }[];
  const addrs = links
    .filter((l) => l.ifname !== 'lo')
    .flatMap((l) =>
      (l.addr_info ?? []).map((a) => ({ dev: l.ifname, cidr: `${a.local}/${a.prefixlen}` })),
    );
  const routes = (
    JSON.parse(ip(netnsFile, ['-j', '-4', 'route', 'show'])) as {
      dst: string;
      gateway?: string;
      dev: string;
      protocol?: string;
    }[]
  )
    .filter((r) => r.protocol !== 'kernel') // the kernel makes those again with the address
    .map((r) => ({ dst: r.dst, dev: r.dev, ...(r.gateway ? { via: r.gateway } : {}) }));
  return { addrs, routes };
}

/** Puts `saved` back into the namespace at `netnsFile` (`replace`: idempotent). */
export function restoreAddresses(netnsFile: string, saved: NetnsAddresses): void {
  for (const a of saved.addrs) ip(netnsFile, ['addr', 'replace', a.cidr, 'dev', a.dev]);
  for (const r of saved.routes) {
    ip(netnsFile, ['route', 'replace', r.dst, ...(r.via ? ['via', r.via] : []), 'dev', r.dev]);
  }
}
