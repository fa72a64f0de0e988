/**
 * Loop devices for an image file, through losetup. The pool attaches one device per image
 * and, once the filesystem is mounted, marks it auto-clearing, so that the device goes
 * away with the last unmount whoever does it (the pool's close, or an operator by hand).
 */
import { runTool } from './run.js';

/** Loop devices currently backed by `image` (losetup compares the file's inode, not its name). */
export async function loopDevicesOf(image: string): Promise<string[]> {
  const { stdout } = await runTool('losetup', [
    '--list',
    '--noheadings',
    '--output',
    'NAME',
    '--associated',
    image,
  ]);
  return stdout
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l.startsWith('/dev/'));
}

/**
 * Attaches `image` to a free loop device and returns its path. Direct I/O keeps the image's
 * pages out of the host page cache, where they would sit a second time beside btrfs's own.
 */
export async function attachLoop(image: string): Promise<string> {
  const { stdout } = await runTool('losetup', ['--find', '--show', '--direct-io=on', image]);
  const device = stdout.trim();
  if (!device.startsWith('/dev/')) throw new Error(`losetup printed no device: ${stdout}`);
  return device;
}

/**
 * Detaches `device`. On a device that is still in use (mounted) the kernel only sets its
 * auto-clear flag, which is how the pool arms auto-clearing after mounting.
 */
export async function detachLoop(device: string): Promise<void> {
  await runTool('losetup', ['--detach', device]);
}
