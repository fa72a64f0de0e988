/**
 * What the btrfs tests need around them: whether this host can run them at all, and a
 * cleanup that leaves no mount and no loop device behind even when a test failed halfway.
 */
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { detachLoop, loopDevicesOf } from './loop.js';
import { readMounts } from './mounts.js';
import { runTool } from './run.js';

/** Why the btrfs tests cannot run here, or undefined when they can (and then must). */
export function btrfsSkipReason(): string | undefined {
  if (process.getuid?.() !== 0) return 'btrfs pool tests need root (mounts, loop devices, quotas)';
  const dirs = ['/usr/sbin', '/sbin', '/usr/bin', '/bin', '/usr/local/sbin'];
  if (!dirs.some((d) => existsSync(path.join(d, 'mkfs.btrfs')))) {
    return 'btrfs pool tests need mkfs.btrfs (apt-get install btrfs-progs)';
  }
  if (!existsSync('/dev/loop-control')) return 'btrfs pool tests need loop devices';
  return undefined;
}

/** A fresh directory for one test file's pools, on the tmp filesystem (ext4 here). */
export function tempPoolDir(label: string): Promise<string> {
  return mkdtemp(path.join(os.tmpdir(), `pier-pool-${label}-`));
}

/**
 * Unmounts everything under `dir`, detaches loop devices on its images and removes it.
 * If something cannot be unmounted the directory is kept: removing it would reach into
 * the mounted filesystem.
 */
export async function forceCleanup(dir: string, images: string[] = []): Promise<void> {
  const under = (await readMounts())
    .filter((m) => m.mountPoint === dir || m.mountPoint.startsWith(`${dir}/`))
    .reverse();
  for (const m of under) {
    await runTool('umount', [m.mountPoint]).catch(() => runTool('umount', ['-l', m.mountPoint]));
  }
  for (const image of images) {
    if (!existsSync(image)) continue;
    for (const device of await loopDevicesOf(image)) await detachLoop(device).catch(() => {});
  }
  const left = (await readMounts()).filter((m) => m.mountPoint.startsWith(`${dir}/`));
  if (left.length === 0) await rm(dir, { recursive: true, force: true });
}
