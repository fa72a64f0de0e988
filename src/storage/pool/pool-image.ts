/**
 * The image file that holds a btrfs pool when the data dir is not on btrfs itself: made
 * once (sparse), formatted once, attached to a loop device and mounted. Every step first
 * looks at what is already there, so that a restart (even after a crash at any point)
 * takes the same image back and never formats a filesystem that exists.
 */
import { chmod, mkdir, open, realpath, unlink } from 'node:fs/promises';
import { attachLoop, detachLoop, loopDevicesOf } from './loop.js';
import { mountsAt } from './mounts.js';
import { PoolError } from './pool.js';
import { runTool, ToolError } from './run.js';

/** A mounted image: what {@link closeImage} needs to undo it. */
export interface MountedImage {
  image: string;
  mountPoint: string;
  device: string;
}

/**
 * The filesystem type `blkid` finds in `image`, or undefined when it finds none. Probing
 * the file (-p, no cache) reads the superblock itself, so a stale cache cannot lie.
 */
async function filesystemOf(image: string): Promise<string | undefined> {
  try {
    const { stdout } = await runTool('blkid', ['-p', '-o', 'value', '-s', 'TYPE', image]);
    return stdout.trim() || undefined;
  } catch (err) {
    // Exit status 2: nothing recognisable in the file (blkid(8)).
    if (err instanceof ToolError && err.exitCode === 2) return undefined;
    throw err;
  }
}

/** Creates `image` as a sparse file of `sizeBytes` unless it exists; true when it made it. */
async function createSparse(image: string, sizeBytes: number): Promise<boolean> {
  let handle;
  try {
    handle = await open(image, 'wx', 0o600);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw err;
  }
  try {
    await handle.truncate(sizeBytes);
    await handle.sync();
  } finally {
    await handle.close();
  }
  return true;
}

/**
 * Makes sure `image` exists, holds a btrfs filesystem and is mounted at `mountPoint`,
 * reusing a mount or loop device left by an earlier process. On failure it undoes what
 * this call did (and only that).
 */
export async function mountImage(opts: {
  image: string;
  mountPoint: string;
  sizeBytes: number;
}): Promise<MountedImage> {
  await mkdir(opts.mountPoint, { recursive: true, mode: 0o711 });
  const mountPoint = await realpath(opts.mountPoint);
  const created = await createSparse(opts.image, opts.sizeBytes);
  const image = await realpath(opts.image);
  let attached: string | undefined;
  let mounted = false;
  try {
    const devices = await loopDevicesOf(image);
    const existing = (await mountsAt(mountPoint)).at(-1);
    if (existing) {
      if (existing.fsType !== 'btrfs' || !devices.includes(existing.source)) {
        throw new PoolError(
          'backend',
          `${mountPoint} has ${existing.source} (${existing.fsType}) mounted, not the pool image ${image}`,
        );
      }
      return { image, mountPoint, device: existing.source };
    }

    const fsType = await filesystemOf(image);
    if (fsType === undefined) {
      await runTool('mkfs.btrfs', ['-q', '-L', 'pier-pool', image]);
    } else if (fsType !== 'btrfs') {
      // Never format over something: the file may be someone's data.
      throw new PoolError('backend', `${image} holds a ${fsType} filesystem, not btrfs`);
    }

    // A device left attached by a process that died before mounting is taken back: a
    // second device on the same image would let two mounts write one filesystem.
    let device = devices[0];
    if (device === undefined) device = attached = await attachLoop(image);
    await runTool('mount', ['-t', 'btrfs', '-o', 'noatime', device, mountPoint]);
    mounted = true;
    await detachLoop(device); // arms auto-clear: the device goes with the last unmount
    // The services' users must pass through to their own volumes, but not list them.
    await chmod(mountPoint, 0o711);
    return { image, mountPoint, device };
  } catch (err) {
    if (mounted) await runTool('umount', [mountPoint]).catch(() => undefined);
    if (attached) await detachLoop(attached).catch(() => undefined);
    if (created) await unlink(image).catch(() => undefined);
    throw err;
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Unmounts the pool and makes sure no loop device is left on the image. The unmount is
 * not lazy: a volume still in use (a process inside it, a bind mount) fails it with the
 * kernel's "target is busy" rather than leaving a filesystem that nobody can see.
 */
export async function closeImage(m: MountedImage): Promise<void> {
  if ((await mountsAt(m.mountPoint)).length > 0) await runTool('umount', [m.mountPoint]);
  // Auto-clear usually frees the device at once; give the kernel a moment, then insist.
  for (let i = 0; i < 20; i++) {
    if ((await loopDevicesOf(m.image)).length === 0) return;
    await sleep(50);
  }
  for (const device of await loopDevicesOf(m.image)) await detachLoop(device);
}
