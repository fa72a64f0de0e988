/**
 * The scene of the isolation tests, under either runtime (isolation.test.ts for runc,
 * runsc.test.ts for gVisor): two machines on a bridge of the test's own, `a` serving the
 * image's /var/www on port 80 and leaving traces, `b` the one that probes; a server of
 * the host's on the gateway; a volume with a writable and a read-only part.
 */
import { chown, mkdir, writeFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import type { Network } from './network.js';
import type { MachineRuntimeName } from './runtimes.js';
import { makeBed, type Bed } from './testbed.test-helper.js';

/** What the tests work with; `close` removes all of it. */
export interface TwoMachines {
  bed: Bed;
  /** The host's server on the gateway, which machines must not reach. */
  hostPort: number;
  /** A host directory with `rw/` (machine root's) and `ro/config`. */
  volume: string;
  /** Runs `script` in a fresh `b` and collects its output. */
  probeB(script: string, over?: object): ReturnType<Bed['probe']>;
  close(): Promise<void>;
}

/**
 * Makes the scene on `net` (its CIDR's .2 is `a`, .3 is `b`); `serve` is a's script,
 * which ends by serving HTTP on port 80.
 */
export async function startTwoMachines(
  net: Network,
  opts: {
    tag: string;
    runtime?: MachineRuntimeName;
    limits: { memoryBytes: number; pids: number };
    serve: string;
  },
): Promise<TwoMachines> {
  const bed = await makeBed(opts.tag, opts.runtime);
  const nets = new Map<string, { netns: string; userns: string }>();
  const nsName = (id: string) => `${opts.tag}${process.pid}${id}`;
  await net.ensureBridge();
  const server = http.createServer((_, res) => res.end('hello from the host\n'));
  await new Promise<void>((r) => server.listen(0, net.gateway, r));
  const base = net.cidr.split('/')[0]!.split('.').slice(0, 3).join('.');
  for (const [id, last] of [
    ['a', 2],
    ['b', 3],
  ] as const) {
    await bed.machine(id, opts.limits);
    const n = await net.createNetns(nsName(id), `${base}.${last}`);
    nets.set(id, { netns: n.netns, userns: n.userns });
  }
  const volume = path.join(bed.dir, 'volume-data');
  await mkdir(path.join(volume, 'rw'), { recursive: true });
  await chown(path.join(volume, 'rw'), 200_000, 200_000); // machine root's, as prepare.ts makes it
  await mkdir(path.join(volume, 'ro'), { recursive: true });
  await writeFile(path.join(volume, 'ro/config'), 'setting=1\n');
  const netOf = (id: 'a' | 'b') => nets.get(id)!;
  await bed.sandboxes.run(
    await bed.spec('a', opts.serve, { ...netOf('a'), hostname: 'machine-a' }),
  );
  return {
    bed,
    hostPort: (server.address() as AddressInfo).port,
    volume,
    probeB: (script, over = {}) =>
      bed.probe('b', script, { ...netOf('b'), hostname: 'machine-b', ...over }),
    async close() {
      await bed.cleanup();
      server.close();
      for (const id of ['a', 'b']) await net.removeNetns(nsName(id)).catch(() => {});
      await net.removeBridge();
    },
  };
}
