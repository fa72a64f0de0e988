/**
 * The machine runtime of this host, made on first use: a control plane that never runs a
 * machine (or a test that does not) pays nothing for it, and a host that cannot run
 * machines (not root, no cgroup freezer) says why on the first request instead of at
 * start. The local runtime is the one implementation today.
 */
import path from 'node:path';
import type { Logger } from 'pino';
import { CgroupSet } from '../host/cgroups/cgroup.js';
import type { OutboundGuard } from '../host/outbound-guard.js';
import type { PoolHandle } from '../storage/pool-handle.js';
import { ImageStore, type ImageLimits } from './images/index.js';
import { LocalRuntime, type WallsOptions } from './local/index.js';

import type { MachineRuntime } from './runtime.js';
import type { MachineRuntimeName } from './sandbox/index.js';

export interface HostRuntimeOptions {
  dataDir: string;
  pool: PoolHandle;
  log: Logger;
  network: { bridge: string; cidr: string };
  /** The OCI runtime new machine starts use (PIER_MACHINE_RUNTIME; default runc). */
  sandboxRuntime?: MachineRuntimeName;
  /** What machines may reach beyond their group (PIER_ALLOW_PRIVATE_TARGETS…). */
  walls?: WallsOptions;
  /** What image pulls may reach (registries, token realms, redirects): host/outbound-guard.ts. */
  outbound: OutboundGuard;
  /** The caps on one image (PIER_IMAGE_MAX_UNPACKED_GB, _ENTRIES, _DOWNLOAD_GB). */
  imageLimits: ImageLimits;
  /** The host's copy of the platform CA certificate, which every machine gets. */
  platformCaFile?: string;
  /** Called once the machines' bridge is made (LocalRuntimeOptions.onBridgeUp). */
  onBridgeUp?: () => Promise<void>;
  /** The image store to run from, shared with the builder (default: one of its own). */
  images?: ImageStore;
}

/** The host's image store: `DATA_DIR/images`, pulls through the outbound guard. */
export function hostImageStore(
  opts: Pick<HostRuntimeOptions, 'dataDir' | 'log' | 'outbound' | 'imageLimits'>,
): ImageStore {
  return new ImageStore({
    dir: path.join(opts.dataDir, 'images'),
    log: opts.log,
    guard: opts.outbound,
    limits: opts.imageLimits,
  });
}

/** A `MachineRuntime` whose every call first makes (once) the local runtime. */
export function hostRuntime(
  opts: HostRuntimeOptions,
): MachineRuntime & Required<Pick<MachineRuntime, 'buildNetwork'>> {
  let made: Promise<LocalRuntime> | undefined;
  const get = () => {
    made ??= (async () => {
      if (process.getuid?.() !== 0) throw new Error('machines need pier to run as root');
      const cgroups = await CgroupSet.detect();
      if (!cgroups) throw new Error('machines need a cgroup freezer on this host');
      const { pool } = await opts.pool.get();
      return new LocalRuntime({
        dataDir: opts.dataDir,
        pool,
        images: opts.images ?? hostImageStore(opts),
        cgroups,
        network: opts.network,
        ...(opts.sandboxRuntime ? { sandboxRuntime: opts.sandboxRuntime } : {}),
        ...(opts.walls ? { walls: opts.walls } : {}),
        log: opts.log,
        ...(opts.platformCaFile ? { platformCaFile: opts.platformCaFile } : {}),
        ...(opts.onBridgeUp ? { onBridgeUp: opts.onBridgeUp } : {}),
      });
    })().catch((err: unknown) => {
      made = undefined;
      throw err;
    });
    return made;
  };
  return {
    create: async (spec, o) => (await get()).create(spec, o),
    start: async (spec) => (await get()).start(spec),
    stop: async (spec) => (await get()).stop(spec),
    suspend: async (id) => (await get()).suspend(id),
    resume: async (id) => (await get()).resume(id),
    destroy: async (id) => (await get()).destroy(id),
    status: async (id) => (await get()).status(id),
    logs: async (id, o) => (await get()).logs(id, o),
    recover: async () => (await get()).recover(),
    address: async (id, port) => (await get()).address(id, port),
    listening: async (id, port) => (await get()).listening(id, port),
    checkpoint: async (id, key) => (await get()).checkpoint(id, key),
    restoreCheckpoint: async (id, key) => (await get()).restoreCheckpoint(id, key),
    deleteCheckpoint: async (id, key) => (await get()).deleteCheckpoint(id, key),
    memoryCheckpoints: async () => (await get()).memoryCheckpoints(),
    guest: async (id) => (await get()).guest(id),
    cpuTime: async (id) => (await get()).cpuTime(id),
    shell: async (id, o) => (await get()).shell(id, o),
    buildNetwork: async (buildId) => (await get()).buildNetwork(buildId),
    // Never makes the runtime just to close it (a platform without machines stays so).
    close: async () => (made ? (await made.catch(() => undefined))?.close() : undefined),
  };
}
