/**
 * What a test of machines through the API needs: a real local OCI registry, a platform on
 * a bridge and network of the test file's own (removed at the end, so files running at
 * once never share one), an organization, and cleanup that destroys every machine left.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { pushImage, type ImageSpec } from '../../src/runtime/images/build.test-helper.js';
import { networkOf, overlaps } from '../../src/runtime/sandbox/cidr.js';
import { Network } from '../../src/runtime/sandbox/network.js';
import {
  restartTestPlatform,
  startTestPlatform,
  type ApiAnswer,
  type TestOrg,
  type TestPlatform,
} from '../helpers/platform.js';
import { startRegistry, type TestRegistry } from '../helpers/registry.js';

const execFileP = promisify(execFile);

export interface MachineBed {
  registry: TestRegistry;
  tp: TestPlatform;
  org: TestOrg;
  /** A JSON request with the org's key (or `token`). */
  req(method: string, path: string, body?: unknown, token?: string): Promise<ApiAnswer<any>>;
  /** Stops pier and starts it again on the same database and data (machines keep running). */
  restart(): Promise<void>;
  /** Pushes an image to the registry; returns its reference. */
  image(name: string, spec: ImageSpec): Promise<string>;
  close(): Promise<void>;
}

/** Machines need root (runc, netns, cgroups). */
export const canRunMachines = process.getuid?.() === 0;

/**
 * A machines network `10.<octet>.0.0/16` with `octet` in [base, base + 9] that no
 * interface of the host has an address in: a bridge left by a crashed run keeps its
 * range, and pier refuses a network that overlaps one (a machine behind it would never
 * answer).
 */
/** Removes a test's machines bridge with its walls (nftables tables); idempotent. */
export async function removeMachinesNetwork(bridge: string, cidr: string): Promise<void> {
  if (!cidr) return;
  await new Network({ bridge, cidr }).removeBridge().catch(() => undefined);
}

export async function freeMachineCidr(base: number): Promise<string> {
  const { stdout } = await execFileP('ip', ['-j', '-4', 'addr', 'show']);
  const used = (
    JSON.parse(stdout || '[]') as { addr_info?: { local: string; prefixlen: number }[] }[]
  )
    .flatMap((l) => l.addr_info ?? [])
    .map((a) => networkOf(a.local, a.prefixlen));
  const start = base + (process.pid % 10);
  for (let i = 0; i < 10; i++) {
    const cidr = `10.${base + ((start - base + i) % 10)}.0.0/16`;
    if (!used.some((u) => overlaps(u, cidr))) return cidr;
  }
  throw new Error(
    `no free machines network in 10.${base}–${base + 9}.0.0/16: clean up old bridges`,
  );
}

/**
 * Starts the bed. `prefix` (two letters) names the bridge, `octet` the range of its
 * network (`freeMachineCidr`). Test files run at once, so each has a range of ten of
 * its own: api 100, checkpoints 120, guest 140, volumes 160, the CLI's 180, the console's
 * 200 (the runtime testbeds use 216–218; the benchmarks pick a free one).
 */
export async function startMachineBed(
  prefix: string,
  octet: number,
  /** Settings of the platform beyond the bed's own (`livenessIntervalMs`…). */
  extra: Record<string, unknown> = {},
): Promise<MachineBed> {
  const bridge = `${prefix}${process.pid % 100000}`;
  const registry = await startRegistry();
  const config = {
    machinesBridge: bridge,
    machinesCidr: await freeMachineCidr(octet),
    livenessIntervalMs: 300,
    // The registry is on 127.0.0.1, which the outbound guard refuses: trusted by name,
    // as an operator would, so pulls still go through the guard.
    trustedRegistries: [registry.host],
    ...extra,
  };
  // A platform that fails to start (a port taken meanwhile) leaves no registry or bridge.
  const first = await startTestPlatform(config).catch(async (err: unknown) => {
    await registry.stop();
    await removeMachinesNetwork(bridge, config.machinesCidr);
    throw err;
  });
  const org = await first.createOrg();
  const bed: MachineBed = {
    registry,
    tp: first,
    org,
    req: (method, path, body, token = org.token) => bed.tp.request(method, path, { token, body }),
    async restart() {
      bed.tp = await restartTestPlatform(bed.tp, config);
    },
    async image(name, spec) {
      await pushImage(registry.url, name, spec);
      return `${registry.host}/${name}`;
    },
    async close() {
      for (const a of (await bed.req('GET', '/v1/apps')).body ?? []) {
        for (const m of (await bed.req('GET', `/v1/apps/${a.name}/machines`)).body ?? []) {
          await bed.req('POST', `/v1/machines/${m.id}/destroy`);
        }
      }
      await bed.tp.close();
      await registry.stop();
      await removeMachinesNetwork(bridge, config.machinesCidr);
    },
  };
  return bed;
}
