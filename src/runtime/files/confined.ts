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
 *
 * The kernel's windows are refused (`ProtectedPathError`): `/proc`, `/sys` and `/dev` as
 * the machine resolves the path (a symlink into them too), and every directory or file
 * that sits on a pseudo file system (proc, sysfs, cgroupfs, …) wherever it is mounted.
 * The walk runs as host root: through those it would read the machine's secrets
 * (`/proc/1/environ`) or the host's (`/proc/kallsyms`), or make cgroups with a `mkdir`.
 * Only regular files are opened (`openRegular`), and never in a way that can block: a
 * FIFO, socket or device is refused (`SpecialFileError`) before its driver sees an open.
 *
 * Given the machine's user (`file-user.ts`), the walk also needs what the kernel would
 * ask of that user: search permission on every directory it looks a name up in (`..`
 * included), and write permission on a directory it makes one in.
 */
import { constants, type Stats } from 'node:fs';
import { lstat, mkdir, open, readlink, statfs, type FileHandle } from 'node:fs/promises';
import {
  MAY_EXEC,
  MAY_WRITE,
  mayAccess,
  PermissionDeniedError,
  type FileUser,
} from './file-user.js';

const { O_RDONLY, O_DIRECTORY, O_NOFOLLOW, O_NONBLOCK, O_NOCTTY } = constants;
/**
 * `O_PATH` (Linux; Node does not export it, the value is the generic one of x86-64 and
 * arm64): a handle on the inode that opens nothing, so a FIFO cannot block it and a
 * device's driver never sees it. `fstat` and `statfs` work on it.
 */
const O_PATH = 0o10000000;

/** The machine's directories that are the kernel's, never read or written from the host. */
const PROTECTED_TOP = new Set(['proc', 'sys', 'dev']);

/**
 * Pseudo file systems by `statfs` magic (linux/magic.h). `devtmpfs` reports tmpfs's
 * magic and cannot be told from it here; what it holds are device nodes, refused by type.
 */
const PSEUDO_FS = new Map<number, string>([
  [0x9fa0, 'proc'],
  [0x62656572, 'sysfs'],
  [0x1cd1, 'devpts'],
  [0x64626720, 'debugfs'],
  [0x73636673, 'securityfs'],
  [0x27e0eb, 'cgroup'],
  [0x63677270, 'cgroup2'],
  [0x74726163, 'tracefs'],
  [0xcafe4a11, 'bpf'],
  [0x6165676c, 'pstore'],
  [0xde5e81e4, 'efivarfs'],
  [0x62656570, 'configfs'],
  [0x65735543, 'fusectl'],
  [0x42494e4d, 'binfmt_misc'],
  [0x19800202, 'mqueue'],
  [0xf97cff8c, 'selinuxfs'],
  [0x43415d53, 'smackfs'],
  [0x6e736673, 'nsfs'],
  [0x0187, 'autofs'],
  [0x67596969, 'rpc_pipefs'],
  [0x9fa2, 'usbdevfs'],
  [0x62646576, 'bdev'],
  [0x534f434b, 'sockfs'],
  [0x50495045, 'pipefs'],
  [0x09041934, 'anon_inodefs'],
]);

/** Symlinks followed in one resolution before it is called a loop (as Linux does). */
const MAX_LINKS = 40;

/** A path that leaves the machine's root. */
export class PathEscapeError extends Error {
  constructor(readonly path: string) {
    super(`${path} leads outside the machine's filesystem`);
    this.name = 'PathEscapeError';
  }
}

/**
 * A path whose resolution fails inside the root (missing, not a directory, a loop), or
 * that a change of the tree cannot take (exists already, not empty, another file system).
 */
export class PathError extends Error {
  constructor(
    readonly code:
      'ENOENT' | 'ENOTDIR' | 'ELOOP' | 'EISDIR' | 'EEXIST' | 'ENOTEMPTY' | 'EXDEV' | 'EINVAL',
    message: string,
  ) {
    super(message);
    this.name = 'PathError';
  }
}

/**
 * A path the files API never reaches: under the machine's `/proc`, `/sys` or `/dev`, or
 * on a pseudo file system (`fsType`) wherever that is mounted.
 */
export class ProtectedPathError extends Error {
  constructor(
    readonly path: string,
    readonly fsType?: string,
  ) {
    super(
      fsType
        ? `${path} is on the kernel's ${fsType} file system, which the files API does not reach`
        : `${path} is under /proc, /sys or /dev, which the files API does not reach`,
    );
    this.name = 'ProtectedPathError';
  }
}

/** What a non-regular, non-directory file is, in words. */
export type SpecialKind = 'FIFO' | 'socket' | 'character device' | 'block device' | 'special file';

/** A FIFO, socket or device where a regular file (or a directory) was wanted. */
export class SpecialFileError extends Error {
  constructor(
    readonly path: string,
    readonly kind: SpecialKind,
  ) {
    super(`${path} is a ${kind}; the files API reads and writes regular files only`);
    this.name = 'SpecialFileError';
  }
}

/** The kind of a file that is neither regular, nor a directory, nor a symlink. */
export function specialKind(st: Stats): SpecialKind {
  if (st.isFIFO()) return 'FIFO';
  if (st.isSocket()) return 'socket';
  if (st.isCharacterDevice()) return 'character device';
  if (st.isBlockDevice()) return 'block device';
  return 'special file';
}

/** Refuses the open handle `h` when it sits on a pseudo file system. */
export async function refusePseudo(h: FileHandle, shown: string): Promise<void> {
  const { type } = await statfs(`/proc/self/fd/${h.fd}`);
  const name = PSEUDO_FS.get(type >>> 0);
  if (name !== undefined) throw new ProtectedPathError(shown, name);
}

/**
 * Throws PermissionDeniedError unless `user` may access the directory or file open as
 * `h` as `want`; nothing is checked without a user (host root's own reads).
 */
export async function need(
  h: FileHandle,
  user: FileUser | undefined,
  want: number,
  shown: string,
  action: PermissionDeniedError['action'],
): Promise<void> {
  if (user && !mayAccess(await h.stat(), user, want)) {
    throw new PermissionDeniedError(shown, action);
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
  opts: {
    followLast?: boolean;
    createDirs?: boolean;
    /** Host uid and gid of the directories `createDirs` makes (default: the process's). */
    owner?: { uid: number; gid: number };
    /** The machine's user, whose permissions the walk needs (see above). */
    user?: FileUser;
  } = {},
): Promise<{ parent: FileHandle; name: string | undefined }> {
  const stack: FileHandle[] = [root];
  const top = () => stack[stack.length - 1]!;
  const release = async (keep?: FileHandle) => {
    for (const h of stack.slice(1)) if (h !== keep) await h.close();
  };
  let pending = components(target);
  let links = 0;
  await refusePseudo(root, target);
  try {
    while (pending.length > 0) {
      const [part, ...rest] = pending as [string, ...string[]];
      pending = rest;
      // Every name, `..` too, is looked up in the directory on top: the user must search it.
      await need(top(), opts.user, MAY_EXEC, target, 'search');
      if (part === '..') {
        if (stack.length === 1) throw new PathEscapeError(target);
        await stack.pop()!.close();
        continue;
      }
      // As the machine resolves it: after `..` and symlinks, at its root.
      if (stack.length === 1 && PROTECTED_TOP.has(part)) throw new ProtectedPathError(target);
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
      let made = false;
      if (!st) {
        if (!opts.createDirs) throw new PathError('ENOENT', `${target}: no such file or directory`);
        await need(top(), opts.user, MAY_WRITE | MAY_EXEC, target, 'write');
        made = await mkdir(at(top(), part), { mode: 0o755 }).then(
          () => true,
          (err: NodeJS.ErrnoException) => {
            if (err.code !== 'EEXIST') throw err;
            return false;
          },
        );
      } else if (!st.isDirectory()) {
        throw new PathError('ENOTDIR', `${target}: a component is not a directory`);
      }
      stack.push(await openDir(at(top(), part), target));
      // Through the handle just opened, so what was made is what is chowned.
      if (made && opts.owner) await top().chown(opts.owner.uid, opts.owner.gid);
      // Checked before anything is looked up, made (a mkdir in cgroupfs makes a cgroup) or
      // opened in it.
      await refusePseudo(top(), target);
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

/**
 * Opens a directory without following a symlink in its place (`O_DIRECTORY` fails before
 * any other kind of file is opened, and `O_NONBLOCK` would keep even that from waiting).
 */
export async function openDir(hostPath: string, shown: string): Promise<FileHandle> {
  try {
    return await open(hostPath, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    // ELOOP: it became a symlink since it was looked at; ENOTDIR: it is no directory.
    if (code === 'ELOOP' || code === 'ENOTDIR' || code === 'ENOENT') {
      throw new PathError(code, `${shown}: changed while being opened, or not a directory`);
    }
    throw err;
  }
}

/**
 * Opens the regular file `name` of the directory open as `dir` for reading, never
 * blocking and never opening anything else: an `O_PATH` handle (which opens nothing) is
 * looked at first, and only a regular file off the pseudo file systems is then opened,
 * through that very handle, so the machine cannot swap a FIFO or a device in between.
 * A directory is `EISDIR`, a symlink in the name's place (swapped in since it was
 * resolved) `ELOOP`, anything else `SpecialFileError`.
 */
export async function openRegular(
  dir: FileHandle,
  name: string,
  shown: string,
): Promise<{ file: FileHandle; stats: Stats }> {
  const handle = await open(at(dir, name), O_PATH | O_NOFOLLOW).catch(
    (err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT') throw new PathError('ENOENT', `${shown}: no such file`);
      throw err;
    },
  );
  try {
    const st = await handle.stat();
    if (st.isDirectory()) throw new PathError('EISDIR', `${shown} is a directory`);
    if (st.isSymbolicLink()) throw new PathError('ELOOP', `${shown}: changed while being opened`);
    if (!st.isFile()) throw new SpecialFileError(shown, specialKind(st));
    await refusePseudo(handle, shown);
    // The magic link of our own handle: the same inode, whatever the name means now.
    const file = await open(`/proc/self/fd/${handle.fd}`, O_RDONLY | O_NONBLOCK | O_NOCTTY);
    const stats = await file.stat();
    if (!stats.isFile() || stats.ino !== st.ino || stats.dev !== st.dev) {
      await file.close();
      throw new PathError('ELOOP', `${shown}: changed while being opened`);
    }
    return { file, stats };
  } finally {
    await handle.close();
  }
}
