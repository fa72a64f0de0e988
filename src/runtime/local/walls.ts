/**
 * The walls of this runtime's network, kept equal to its machine records and the
 * addresses lent to builds (build-networks.ts): each change of a machine (created, started
 * with a new spec, destroyed), each lend or return of a build's network, each recovery and
 * each change of an allowed name's addresses rewrites the whole ruleset from the records
 * (see sandbox/walls-ruleset.ts). Rewrites run one at a time and each reads the records
 * when it starts, so the last one always sees every machine.
 */
import { REFUSED_V4_RANGES } from '../../host/outbound-guard.js';
import { applyWalls, type WallsMachine } from '../sandbox/index.js';
import { EgressNames } from './egress-names.js';
import type { DnsPolicy } from './machine-dns.js';
import type { BuildLease, MachineRecord, MachineRecords } from './records.js';

/** Options of {@link MachineWalls}, as the runtime's owner sets them. */
export interface WallsOptions {
  /** `PIER_ALLOW_PRIVATE_TARGETS`: machines may reach private and loopback-range networks. */
  allowPrivate?: boolean;
  /** DNS servers that resolve egress allowlists' names (default the host's). */
  dnsServers?: string[];
  /** Shortest wait between two lookups of one allowed name (default 5 s). */
  minRefreshMs?: number;
}

/** Keeps the network's nftables walls in step with the machine records. */
export class MachineWalls {
  private tail: Promise<void> = Promise.resolve();
  private readonly names: EgressNames;
  /** Each machine's egress by address, as of the last rewrite (for the machines' resolver). */
  private egressByIp = new Map<string, MachineRecord['network']>();
  private resolver: string | undefined;

  constructor(
    private readonly net: { bridge: string; cidr: string },
    private readonly records: MachineRecords,
    private readonly opts: WallsOptions,
    private readonly log: { warn(obj: object, msg: string): void },
  ) {
    this.names = new EgressNames({
      ...(opts.dnsServers ? { servers: opts.dnsServers } : {}),
      ...(opts.minRefreshMs !== undefined ? { minRefreshMs: opts.minRefreshMs } : {}),
      log,
      onChange: () => {
        this.sync().catch((err: Error) =>
          log.warn({ err: err.message }, 'walls not updated after an allowed name moved'),
        );
      },
    });
  }

  /** Rewrites the walls from the records as they are once the previous rewrite is done. */
  sync(): Promise<void> {
    const next = this.tail.then(() => this.apply());
    this.tail = next.catch(() => {});
    return next;
  }

  /** The machines' resolver listens at `ip` (the gateway): port 53 opens there at next sync. */
  useResolver(ip: string): void {
    this.resolver = ip;
  }

  /**
   * How the resolver answers the machine at `ip` (machine-dns.ts): by the egress the walls
   * hold for it, names answering with the addresses the walls allow. Undefined for an
   * address no machine has.
   */
  dnsPolicy(ip: string): DnsPolicy | undefined {
    if (!this.egressByIp.has(ip)) return undefined;
    const egress = this.egressByIp.get(ip)?.egress;
    if (egress === undefined) return { mode: 'open' };
    if (egress.mode === 'deny-all') return { mode: 'deny-all' };
    const names = new Map<string, { addresses: string[]; ttlS: number }>();
    for (const d of egress.domains) {
      const name = d.toLowerCase().replace(/\.$/, '');
      const current = this.names.current(d);
      if (current) names.set(name, current);
    }
    return { mode: 'allowlist', names };
  }

  /** Stops refreshing allowed names. */
  close(): void {
    this.names.close();
  }

  private async apply(): Promise<void> {
    const [records, leases] = await Promise.all([this.records.all(), this.records.leases()]);
    const domains = records.flatMap((r) =>
      r.network?.egress?.mode === 'allowlist' ? r.network.egress.domains : [],
    );
    const resolved = await this.names.addresses(domains);
    const builds = leases.map(buildWallsMachine);
    this.egressByIp = new Map([
      ...records.map((r) => [r.ip, r.network] as const),
      ...builds.map((b) => [b.ip, { group: b.group }] as const),
    ]);
    await applyWalls({
      ...this.net,
      allowPrivate: this.opts.allowPrivate ?? false,
      ...(this.resolver ? { resolver: this.resolver } : {}),
      refusedRanges: REFUSED_V4_RANGES,
      machines: [...records.map((r) => wallsMachine(r, resolved)), ...builds],
    });
  }
}

/**
 * A build's RUN steps as the walls see them (build-networks.ts): a machine of a group of
 * its own (it reaches no machine, and none reaches it), no port of the host but the
 * resolver, and the internet as an app's machine has it by default (public addresses,
 * private ones only where the operator allows them).
 */
function buildWallsMachine(lease: BuildLease): WallsMachine {
  return {
    id: lease.id,
    ip: lease.ip,
    group: `build:${lease.id}`,
    egress: { mode: 'open' },
    hostPorts: [],
  };
}

/**
 * One record as the walls see it. A record of an older version, without `network`, is a
 * group of its own with the internet open until its next start brings a spec.
 */
function wallsMachine(r: MachineRecord, resolved: Map<string, string[]>): WallsMachine {
  const net = r.network ?? { group: `machine:${r.id}` };
  const egress: WallsMachine['egress'] =
    net.egress === undefined
      ? { mode: 'open' }
      : net.egress.mode === 'deny-all'
        ? { mode: 'deny-all' }
        : {
            mode: 'allowlist',
            cidrs: [
              ...net.egress.cidrs,
              ...net.egress.domains.flatMap((d) => resolved.get(d) ?? []),
            ],
          };
  return { id: r.id, ip: r.ip, group: net.group, egress, hostPorts: net.hostPorts ?? [] };
}
