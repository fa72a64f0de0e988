/**
 * Who may connect to a database's front (issue 13 item 5, spec 4.3 "reachable only from
 * attached apps"): the host itself and the machines' network, nobody else, unless the
 * operator made fronts public (`PIER_PUBLIC_DATABASE_FRONTS=1`).
 *
 * The front checks the peer of each accepted connection rather than binding only to the
 * allowed addresses. Binding would need one listener per address per database, opened
 * again whenever the machines' bridge appears (it is made with the first machine, after
 * fronts open at start) or the host's addresses change (DHCP), and a listener on the
 * bridge's address alone still answers any peer that routes to it. A peer check is one
 * listener, is decided per connection from what is true now, and cannot be bypassed by
 * dialing another of the host's addresses. Which machines reach which front is the nft
 * walls' business (runtime/local/walls.ts); this check only keeps the rest of the world out.
 */
import net from 'node:net';
import os from 'node:os';

export interface FrontClientPolicyOptions {
  /** The machines' private IPv4 network (`machinesCidr`): their connections are admitted. */
  machinesCidr: string;
  /** Operator opt-in: admit every peer, as before fronts were walled. */
  public: boolean;
  /**
   * The host's own addresses (default: every interface's, re-read at most once a second):
   * a client on the host that dials the host's LAN address arrives from that address.
   */
  hostAddresses?: () => Iterable<string>;
}

/** Decides, for a connection's peer address, whether the front serves it. */
export type AdmitPeer = (remoteAddress: string | undefined) => boolean;

/** `::ffff:10.0.0.1` (an IPv4 peer on a dual-stack listener) → `10.0.0.1`. */
export function plainAddress(address: string): string {
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(address);
  return mapped ? mapped[1]! : address;
}

const HOST_ADDRESSES_TTL_MS = 1_000;

function interfaceAddresses(): string[] {
  const out: string[] = [];
  for (const list of Object.values(os.networkInterfaces())) {
    for (const a of list ?? []) out.push(plainAddress(a.address.replace(/%.*$/, '')));
  }
  return out;
}

/** The admission check of the fronts of this host. */
export function frontClientPolicy(opts: FrontClientPolicyOptions): AdmitPeer {
  if (opts.public) return () => true;
  const fixed = new net.BlockList();
  fixed.addSubnet('127.0.0.0', 8, 'ipv4');
  fixed.addAddress('::1', 'ipv6');
  const [network, bits] = opts.machinesCidr.split('/');
  fixed.addSubnet(network!, Number(bits), 'ipv4');

  const readHost = opts.hostAddresses ?? interfaceAddresses;
  let host = new Set<string>();
  let readAt = -Infinity;
  const hostHas = (address: string) => {
    // Refused peers are the ones that pay for a fresh read; a flood of them reads once a second.
    if (Date.now() - readAt > HOST_ADDRESSES_TTL_MS) {
      host = new Set([...readHost()].map(plainAddress));
      readAt = Date.now();
    }
    return host.has(address);
  };

  return (remoteAddress) => {
    if (!remoteAddress) return false; // already gone: nothing to serve
    const address = plainAddress(remoteAddress);
    const family = net.isIPv4(address) ? 'ipv4' : net.isIPv6(address) ? 'ipv6' : undefined;
    if (!family) return false;
    return fixed.check(address, family) || hostHas(address);
  };
}
