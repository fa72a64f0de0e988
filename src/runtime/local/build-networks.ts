/**
 * Networks lent to builds. A build's RUN step is a stranger's program, exactly like a
 * machine: it gets a network namespace made as a machine's is (Network.createNetns: a
 * veth on the machines' bridge, an address of the machines' network that no machine has,
 * a default route through the gateway), and the walls hold it as a machine of a group of
 * its own: it reaches no machine and no port of the host (the API, the services
 * listener, database fronts), only the machines' resolver, and beyond the host what an
 * app's machine reaches by default (public addresses; private ones only where the
 * operator allows them). buildah joins the namespace by path (buildah.ts), so it adds
 * no network, route or firewall rule of its own.
 *
 * The address is a lease on disk beside the machine records (records.ts), written before
 * the namespace joins the bridge and taken into every allocation, so no machine gets it
 * while the build runs. Builds do not outlive `pier serve` (a rerun builds again), so the
 * leases a crash left are taken back, with their namespaces, before this runtime lends
 * its first or recovers its machines.
 */
import type { BuildNetwork } from '../runtime.js';
import type { Network } from '../sandbox/index.js';
import type { MachineRecords } from './records.js';
import type { MachineWalls } from './walls.js';

export interface BuildNetworksDeps {
  network: Network;
  records: MachineRecords;
  walls: MachineWalls;
  /** Makes the bridge (and the resolver) once per runtime. */
  ensureBridge(): Promise<void>;
  /** The resolver's address, once it runs. */
  resolver(): string | undefined;
  log: { info(obj: object, msg: string): void; warn(obj: object, msg: string): void };
}

/** The namespace id of build `buildId` (`bld-…`): names its netns and veth, as a machine id does. */
export function buildNetnsId(buildId: string): string {
  const id = buildId.toLowerCase().replace(/[^a-z0-9-]/g, '');
  if (!/^bld-[a-z0-9-]{1,59}$/.test(id)) throw new Error(`invalid build id: ${buildId}`);
  return id;
}

/** Lends builds their networks; see the module comment. */
export class BuildNetworks {
  private swept: Promise<void> | undefined;

  constructor(private readonly deps: BuildNetworksDeps) {}

  /** Takes back (once) what builds of an earlier run of pier left: namespaces and leases. */
  sweep(): Promise<void> {
    this.swept ??= (async () => {
      const { records, network, log } = this.deps;
      const left = await records.leases();
      for (const lease of left) {
        await network.removeNetns(lease.id);
        await records.endLease(lease.id);
      }
      if (left.length) log.info({ builds: left.map((l) => l.id) }, 'build networks swept');
    })().catch((err: unknown) => {
      this.swept = undefined;
      throw err;
    });
    return this.swept;
  }

  async lend(buildId: string): Promise<BuildNetwork> {
    const id = buildNetnsId(buildId);
    const { records, network, walls } = this.deps;
    await this.sweep();
    await this.deps.ensureBridge();
    const lease = await records.lease(id, network.cidr);
    try {
      // The walls hold the lease before the namespace is on the bridge.
      const net = await network.createNetns(id, lease.ip, walls.sync());
      const dns = this.deps.resolver();
      return {
        netnsPath: `/run/netns/${net.netns}`,
        ip: lease.ip,
        ...(dns ? { dns } : {}),
        release: () => this.release(id),
      };
    } catch (err) {
      await this.release(id).catch(() => undefined);
      throw err;
    }
  }

  /** The namespace goes first: the address is free again only once nothing can use it. */
  private async release(id: string): Promise<void> {
    await this.deps.network.removeNetns(id);
    await this.deps.records.endLease(id);
    await this.deps.walls
      .sync()
      .catch((err: Error) =>
        this.deps.log.warn({ build: id, err: err.message }, 'walls not updated after a build'),
      );
  }
}
