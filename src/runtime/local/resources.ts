/**
 * What a machine is given from the host's shared stores: its image (pulled, or pulled
 * again by digest), its writable layer (a pool volume with the disk quota) and its
 * cgroup limits. Failures a customer can act on become MachineStartErrors.
 */
import type { CgroupLimits, CgroupSet } from '../../host/cgroups/cgroup.js';
import { PoolError, type StoragePool } from '../../storage/pool/pool.js';
import {
  formatReference,
  ImageError,
  parseReference,
  type ImageStore,
  type PulledImage,
} from '../images/index.js';
import { MachineStartError, type MachineSpec } from '../runtime.js';
import type { MachineRecord } from './records.js';

const MIB = 1024 * 1024;

/** The writable layer's volume name: `m-` and the id without its `mch-` prefix. */
export function volumeName(id: string): string {
  return `m-${id.replace(/^mch-/, '')}`;
}

/** Pulls `ref`; an ImageError becomes `create-failed` naming the image and the error's code. */
export async function pullImage(
  images: ImageStore,
  ref: string,
  signal?: AbortSignal,
): Promise<PulledImage> {
  try {
    return await images.pull(ref, signal ? { signal } : {});
  } catch (err) {
    if (!(err instanceof ImageError)) throw err;
    throw new MachineStartError(
      'create-failed',
      `image ${ref} could not be pulled (${err.code}): ${err.message}`,
    );
  }
}

/**
 * The unpacked root of the record's image. A start runs the digest the machine was
 * created from (not whatever its tag names now), pulled again if the store dropped it.
 */
export async function imageRoot(images: ImageStore, record: MachineRecord): Promise<string> {
  const have = await images.get(record.image.digest);
  if (have) return have.rootfs;
  const { registry, repository } = parseReference(record.image.ref);
  const ref = formatReference({ registry, repository, digest: record.image.digest });
  return (await pullImage(images, ref)).rootfs;
}

/** The machine's writable layer, `diskMb` big (kept when a retried create finds it). */
export async function writableLayer(
  pool: StoragePool,
  spec: MachineSpec,
): Promise<{ name: string; path: string }> {
  const name = volumeName(spec.id);
  const have = await pool.info(name);
  if (have) return have;
  try {
    return await pool.create(name, { quotaBytes: spec.diskMb * MIB });
  } catch (err) {
    if (err instanceof PoolError && err.code === 'no-space') {
      throw new MachineStartError(
        'no-capacity',
        `no room for a ${spec.diskMb} MB disk: ${err.message}`,
      );
    }
    throw err;
  }
}

/**
 * The cgroup limits of `spec` this host can enforce: memory, CPU as a number of cores,
 * and a cap on processes (a fork bomb stays inside its machine). The rest is reported
 * through `missing`, as a host without a controller still runs machines.
 */
export function machineLimits(
  cgroups: CgroupSet,
  spec: MachineSpec,
  pidsPerVcpu: number,
): { limits: CgroupLimits; missing: string[] } {
  const wanted: CgroupLimits = {
    memoryBytes: spec.memoryMb * MIB,
    cpuQuota: spec.vcpus,
    pids: pidsPerVcpu * Math.max(1, spec.vcpus),
  };
  const kinds = Object.keys(wanted) as (keyof CgroupLimits)[];
  const supported = kinds.filter((k) => cgroups.supports.has(k));
  return {
    limits: Object.fromEntries(supported.map((k) => [k, wanted[k]])),
    missing: kinds.filter((k) => !cgroups.supports.has(k)),
  };
}
