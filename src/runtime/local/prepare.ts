/**
 * Everything a machine needs on the host before its process starts, each step idempotent
 * (a start after a crash, or after a reboot, finishes what is missing): the writable
 * layer's directories, the overlay root, the netns on the bridge, the cgroup with its
 * limits; then the sandbox spec, with the process worked out from the image and the spec.
 */
import { chmod, chown, lstat, mkdir, stat } from 'node:fs/promises';
import path from 'node:path';
import type { CgroupSet } from '../../host/cgroups/cgroup.js';
import type { StoragePool } from '../../storage/pool/pool.js';
import type { ImageConfig } from '../images/index.js';
import { MachineStartError, type MachineSpec } from '../runtime.js';
import {
  hostId,
  mountRootfs,
  resolveInRoot,
  together,
  type Network,
  type SandboxSpec,
} from '../sandbox/index.js';
import { PLATFORM_CA_ENV, platformCaMount } from './platform-ca.js';
import { machineArgv, machineCwd, machineEnv } from './process.js';
import type { MachineRecord } from './records.js';
import { resolveUser, UserError } from './users.js';

/** Where one machine's things are on the host. */
export interface MachinePaths {
  /** The overlay mount point: `<dataDir>/machines/<id>.root`. */
  root: string;
  upper: string;
  work: string;
  /** The sandbox's state (console log, exit status), in the volume. */
  state: string;
}

/** The paths of a machine whose volume is at `volumePath`. */
export function machinePaths(machinesDir: string, id: string, volumePath: string): MachinePaths {
  return {
    root: path.join(machinesDir, `${id}.root`),
    upper: path.join(volumePath, 'upper'),
    work: path.join(volumePath, 'work'),
    state: path.join(volumePath, 'state'),
  };
}

/** What `prepareMachine` works with. */
export interface PrepareContext {
  machinesDir: string;
  pool: StoragePool;
  cgroups: CgroupSet;
  network: Network;
  /** The unpacked image root of the record's digest (pulled again if it was removed). */
  imageRoot: (record: MachineRecord) => Promise<string>;
  logMaxBytes: number;
  /** The host's copy of the platform CA certificate, bound into every machine. */
  platformCaFile?: string;
  /** The resolv.conf naming the machines' resolver (machine-dns.ts), when it runs. */
  resolvConfFile?: string;
  /**
   * Resolves once the bridge and the walls holding this machine's record stand: the
   * machine joins the bridge only then (its namespaces, root and cgroup are made
   * meanwhile). Default: at once.
   */
  bridgeReady?: Promise<unknown>;
  /** Resolves once the record's writable layer exists (a create makes it meanwhile). */
  volumeReady?: Promise<void>;
}

const failed = (message: string) => new MachineStartError('create-failed', message);

/** Makes the machine's host side ready and returns the spec of its sandbox. */
export async function prepareMachine(
  ctx: PrepareContext,
  spec: MachineSpec,
  record: MachineRecord,
): Promise<{ sandbox: SandboxSpec; paths: MachinePaths }> {
  // The root, the network and the cgroup need nothing of each other: made at once. Only
  // the root waits for the writable layer, which a create is still making meanwhile.
  const [paths, net] = await together([
    volumePath(ctx, record).then(async (volume) => {
      const made = machinePaths(ctx.machinesDir, record.id, volume);
      await mountRoot(ctx, record, made);
      return made;
    }),
    ctx.network.createNetns(record.id, record.ip, ctx.bridgeReady),
    ctx.cgroups.create(record.id, record.limits),
  ]);

  const mounts = [];
  for (const v of spec.volumes) {
    const info = await ctx.pool.info(v.volume).catch(() => undefined);
    if (!info) throw failed(`volume ${v.volume} does not exist`);
    await adoptVolume(info.path);
    mounts.push({ source: info.path, target: v.mountPath, readOnly: false });
  }
  if (ctx.platformCaFile) mounts.push(platformCaMount(ctx.platformCaFile));
  if (ctx.resolvConfFile) {
    mounts.push({ source: ctx.resolvConfFile, target: '/etc/resolv.conf', readOnly: true });
  }
  const config: ImageConfig = record.image.config;
  const argv = machineArgv(spec, config);
  if (argv.length === 0) {
    throw failed(
      `image ${spec.image} names no command (no Entrypoint or Cmd) and no start was given`,
    );
  }
  const user = await resolveUser(paths.root, config.user).catch((err: unknown) => {
    throw err instanceof UserError ? failed(`image ${spec.image}: ${err.message}`) : err;
  });
  const cwd = machineCwd(config);
  await ensureDirInRoot(paths.root, cwd);
  // World-writable with the sticky bit, as an image's own /tmp is; some images lack one.
  const tmp = await ensureDirInRoot(paths.root, '/tmp');
  if (tmp !== undefined) await chmod(tmp, 0o1777);
  const sandbox: SandboxSpec = {
    id: record.id,
    rootfs: paths.root,
    netns: net.netns,
    userns: net.userns,
    hostname: spec.hostname,
    argv,
    env: {
      ...(ctx.platformCaFile ? PLATFORM_CA_ENV : {}),
      ...machineEnv(config.env, spec.env, {
        hostname: spec.hostname,
        ...(user.home ? { home: user.home } : {}),
      }),
    },
    cwd,
    uid: user.uid,
    gid: user.gid,
    ...(user.groups ? { groups: user.groups } : {}),
    mounts,
    cgroup: record.id,
    stateDir: paths.state,
    logMaxBytes: ctx.logMaxBytes,
  };
  return { sandbox, paths };
}

/**
 * Where the machine's writable layer is: the path its record holds while that is a
 * directory (asking the pool costs two `btrfs` runs), else the pool's answer.
 */
async function volumePath(ctx: PrepareContext, record: MachineRecord): Promise<string> {
  await ctx.volumeReady;
  const known = await stat(record.volumePath).catch(() => undefined);
  if (known?.isDirectory()) return record.volumePath;
  const volume = await ctx.pool.info(record.volume);
  if (!volume) throw failed(`the writable layer of machine ${record.id} is gone`);
  return volume.path;
}

/** The writable layer's directories and the overlay root on them. */
async function mountRoot(ctx: PrepareContext, record: MachineRecord, paths: MachinePaths) {
  await mkdir(paths.state, { recursive: true, mode: 0o700 });
  // The writable layer's top is the machine's `/` (overlay shows the upper directory's
  // owner there): machine root's, like the image's root.
  await mkdir(paths.upper, { recursive: true, mode: 0o755 });
  await chown(paths.upper, hostId(0), hostId(0));
  await mountRootfs({
    lower: await ctx.imageRoot(record),
    upper: paths.upper,
    work: paths.work,
    merged: paths.root,
  });
}

/**
 * Creates `dir` (inside the machine) when missing, as Docker does for a WorkingDir. The
 * path is resolved as the machine sees it first, so no image symlink leads the mkdir out
 * of the root; the machine is not running, so nothing can swap a component meanwhile.
 * Returns the host path it made, or undefined when the directory was there.
 */
async function ensureDirInRoot(root: string, dir: string): Promise<string | undefined> {
  const host = path.join(root, await resolveInRoot(root, dir));
  const st = await lstat(host).catch(() => undefined);
  if (st) return undefined;
  const first = await mkdir(host, { recursive: true, mode: 0o755 });
  // Root's inside the machine, as Docker makes a WorkingDir: each directory made here.
  for (let d = host; first !== undefined && d.length >= first.length; d = path.dirname(d)) {
    await chown(d, hostId(0), hostId(0));
  }
  return host;
}

/**
 * A fresh volume's top directory is host root's: it becomes machine root's, so the
 * machine can write there. One the machine has made its own is left as it is.
 */
async function adoptVolume(dir: string): Promise<void> {
  const st = await lstat(dir);
  if (st.uid === 0 && st.gid === 0) await chown(dir, hostId(0), hostId(0));
}
