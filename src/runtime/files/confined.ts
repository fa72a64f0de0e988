/**
 * Paths inside a machine's filesystem, reached from the host without ever leaving it.
 *
 * The root is a directory handle (the machine's `/`, opened through `/proc/<pid>/root`,
 * so its mounts — volumes, `/tmp` — are seen as the machine sees them). Every component
 * is looked up relative to an open handle of its parent through `/proc/self/fd/<fd>/<name>`
 * with `O_NOFOLLOW`, which is `openat(2)` for a language without it: a component the
 * machine swaps for a symlink between two steps makes the open fail instead of leading it
 * out. Symlinks are followed by hand, the way the machine would follow them: an absolute
 * target starts again at the machine's root. A path, or a link, whose `..` climbs above
 * the root is refused (`PathEscapeError`), not clamped: it names nothing in the machine.
 */
import { constants } from 'node:fs';
import { lstat, mkdir, open, readlink, type FileHandle } from 'node:fs/promises';

const { O_RDONLY, O_DIRECTORY, O_NOFOLLOW } = constants;

/** Symlinks followed in one resolution before it is called a loop (as Linux does). */
const MAX_LINKS = 40;

/** A path that leaves the machine's root. */
export class PathEscapeError extends Error {
  constructor(readonly path: string) {
    super(`${path} leads outside the machine's filesystem`);
    this.name = 'PathEscapeError';
  }
}

/** A path whose resolution fails inside the root (missing, not a directory, a loop). */
export class PathError extends Error {
  constructor(
    readonly code: 'ENOENT' | 'ENOTDIR' | 'ELOOP' | 'EISDIR',
    message: string,
  ) {
    super(message);
    this.name = 'PathError';
  }
}

/** The host path of `name` inside the directory open as `dir`. */
export const at = (dir: FileHandle, name: string) => `/proc/self/fd/${dir.fd}/${name}`;

/** The components of an absolute path; throws when it is not absolute. */
export function components(p: string): string[] {
  if (!p.startsWith('/')) throw new PathError('ENOENT', `path must be absolute: ${p}`);
  return p.split('/').filter((c) => c !== '' && c !== '.');
}

/**
 * Where `target` is in the root: the open handle of its parent directory and its last
 * name (undefined for the root itself). Every directory on the way is opened and
 * checked; the last component may be missing (a file to create) and, when it is a
 * symlink and `followLast` is set, is followed. `createDirs` makes missing directories
 * on the way (mode 0755). The caller closes `parent` (and only it: the rest are closed here).
 */
export async function resolveParent(
  root: FileHandle,
  target: string,
  opts: { followLast?: boolean; createDirs?: boolean } = {},
): Promise<{ parent: FileHandle; name: string | undefined }> {
  const stack: FileHandle[] = [root];
  const top = () => stack[stack.length - 1]!;
  const release = async (keep?: FileHandle) => {
    for (const h of stack.slice(1)) if (h !== keep) await h.close();
  };
  let pending = components(target);
  let links = 0;
  try {
    while (pending.length > 0) {
      const [part, ...rest] = pending as [string, ...string[]];
      pending = rest;
      if (part === '..') {
        if (stack.length === 1) throw new PathEscapeError(target);
        await stack.pop()!.close();
        continue;
      }
      const last = pending.length === 0;
      const st = await lstat(at(top(), part)).catch((err: NodeJS.ErrnoException) => {
        if (err.code === 'ENOENT') return undefined;
        throw err;
      });
      if (st?.isSymbolicLink() && (!last || opts.followLast !== false)) {
        if (++links > MAX_LINKS) throw new PathError('ELOOP', `too many symlinks in ${target}`);
        const link = await readlink(at(top(), part));
        if (link.startsWith('/')) {
          for (const h of stack.splice(1)) await h.close();
        }
        pending = [...link.split('/').filter((c) => c !== '' && c !== '.'), ...pending];
        continue;
      }
      if (last) {
        const parent = top();
        await release(parent);
        return { parent: parent === root ? await reopen(root) : parent, name: part };
      }
      if (!st) {
        if (!opts.createDirs) throw new PathError('ENOENT', `${target}: no such file or directory`);
        await mkdir(at(top(), part), { mode: 0o755 }).catch((err: NodeJS.ErrnoException) => {
          if (err.code !== 'EEXIST') throw err;
        });
      } else if (!st.isDirectory()) {
        throw new PathError('ENOTDIR', `${target}: a component is not a directory`);
      }
      stack.push(await openDir(at(top(), part), target));
    }
    // The path named the root (`/`, or `a/..`): its parent is itself, with no name.
    const dir = top();
    await release(dir);
    return { parent: dir === root ? await reopen(root) : dir, name: undefined };
  } catch (err) {
    await release();
    throw err;
  }
}

/** A second handle on the same directory, so the caller may close what it gets. */
function reopen(dir: FileHandle): Promise<FileHandle> {
  return open(`/proc/self/fd/${dir.fd}`, O_RDONLY | O_DIRECTORY);
}

/** Opens a directory without following a symlink in its place. */
export async function openDir(hostPath: string, shown: string): Promise<FileHandle> {
  try {
    return await open(hostPath, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    // ELOOP: it became a symlink since it was looked at; ENOTDIR: it is no directory.
    if (code === 'ELOOP' || code === 'ENOTDIR' || code === 'ENOENT') {
      throw new PathError(code, `${shown}: changed while being opened, or not a directory`);
    }
    throw err;
  }
}
