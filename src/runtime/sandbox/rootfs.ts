/**
 * A machine's root filesystem: an overlay of the image's read-only root (`lower`, one
 * directory or several layers, topmost first) and a writable `upper` layer, both mounted
 * at `merged`, which the sandbox binds as its `/`. `upper` and `work` live in the
 * machine's own volume, so what the machine writes counts against that volume's quota
 * and the image stays shared and untouched. The machine's volumes are bound inside by
 * runc at start, not here.
 *
 * Also resolves paths inside a root the way the sandbox will see them: an image may hold
 * symlinks (`/data -> /etc`, `/srv -> ../../..`), and a mount target must never lead
 * the runtime, which sets up mounts while the host's root is still reachable, out of the root.
 */
import { lstat, mkdir, readFile, readlink } from 'node:fs/promises';
import path from 'node:path';
import { run } from './exec.js';

/** The layers of a machine's root. All paths absolute. */
export interface RootfsSpec {
  /** The image root, or its layers topmost first; never written. */
  lower: string | string[];
  /** Where the machine's writes go (in its volume). */
  upper: string;
  /** Overlayfs' scratch directory: empty, on the same filesystem as `upper`. */
  work: string;
  /** Where the merged root is mounted. */
  merged: string;
}

/** Undoes the octal escapes (`\040` for a space…) the kernel writes in mountinfo. */
function unescape(field: string): string {
  return field.replace(/\\([0-7]{3})/g, (_, oct: string) => String.fromCharCode(parseInt(oct, 8)));
}

/** The filesystem type mounted at `dir` (topmost mount), or undefined. */
export async function mountedType(dir: string): Promise<string | undefined> {
  const target = path.resolve(dir);
  const text = await readFile('/proc/self/mountinfo', 'utf8');
  let found: string | undefined;
  for (const line of text.split('\n')) {
    const dash = line.indexOf(' - ');
    if (dash < 0) continue;
    const mountPoint = line.slice(0, dash).split(' ')[4];
    if (mountPoint !== undefined && unescape(mountPoint) === target) {
      found = line.slice(dash + 3).split(' ')[0]; // later lines are mounted on top
    }
  }
  return found;
}

/** Overlay options separate paths with `,` and layers with `:`; refuse both (and `\`). */
function checkPath(p: string, what: string): void {
  if (!path.isAbsolute(p) || /[,:\\\n]/.test(p)) {
    throw new Error(`${what} must be an absolute path without , : or \\: ${JSON.stringify(p)}`);
  }
}

/**
 * Mounts the overlay at `merged` (idempotent: an overlay already there is left as it
 * is). Creates `upper`, `work` and `merged` when missing. Throws when something other
 * than an overlay is mounted at `merged`.
 */
export async function mountRootfs(spec: RootfsSpec): Promise<void> {
  const lowers = Array.isArray(spec.lower) ? spec.lower : [spec.lower];
  if (lowers.length === 0) throw new Error('rootfs needs at least one lower layer');
  for (const p of lowers) checkPath(p, 'lower');
  checkPath(spec.upper, 'upper');
  checkPath(spec.work, 'work');
  checkPath(spec.merged, 'merged');
  const type = await mountedType(spec.merged);
  if (type === 'overlay') return;
  if (type !== undefined) throw new Error(`${spec.merged} already has a ${type} mounted`);
  for (const p of lowers) {
    if (!(await lstat(p)).isDirectory()) throw new Error(`lower ${p} is not a directory`);
  }
  for (const dir of [spec.upper, spec.work]) await mkdir(dir, { recursive: true, mode: 0o755 });
  await mkdir(spec.merged, { recursive: true, mode: 0o755 });
  const options = `lowerdir=${lowers.join(':')},upperdir=${spec.upper},workdir=${spec.work}`;
  await run(['mount', '-t', 'overlay', 'overlay', '-o', options, spec.merged]);
}

/**
 * Unmounts the overlay at `merged` (idempotent). Fails while a process still uses it
 * (stop the sandbox first); nothing is lazily detached behind the caller's back.
 */
export async function unmountRootfs(merged: string): Promise<void> {
  if ((await mountedType(merged)) === undefined) return;
  await run(['umount', merged]);
}

/**
 * `target` (an absolute path as the sandbox sees it) with every symlink resolved as it
 * would be inside the sandbox whose root is `root` on the host: absolute links restart
 * at the root, `..` stops at the root. Missing components are fine (runc creates them
 * as directories); no existing component of the result is a symlink, so runc cannot be
 * led to create or mount anything outside the root. Throws after 40 links (a loop).
 */
export async function resolveInRoot(root: string, target: string): Promise<string> {
  if (!path.isAbsolute(target)) throw new Error(`mount target must be absolute: ${target}`);
  const done: string[] = [];
  let todo = target.split('/').filter((c) => c !== '' && c !== '.');
  let links = 0;
  let missing = false;
  while (todo.length > 0) {
    const [part, ...rest] = todo as [string, ...string[]];
    todo = rest;
    if (part === '..') {
      done.pop();
      continue;
    }
    const host = path.join(root, ...done, part);
    const st = missing ? undefined : await lstat(host).catch(() => undefined);
    if (!st) missing = true;
    if (st?.isSymbolicLink()) {
      if (++links > 40) throw new Error(`too many symlinks resolving ${target} in ${root}`);
      const link = await readlink(host);
      if (link.startsWith('/')) done.length = 0;
      todo = [...link.split('/').filter((c) => c !== '' && c !== '.'), ...todo];
      continue;
    }
    done.push(part);
  }
  return `/${done.join('/')}`;
}
