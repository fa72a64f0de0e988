/**
 * The changes to a machine's tree that SFTP clients make besides writing files: the stats
 * of one path, a directory made, a file or an empty directory removed, a rename. Paths
 * are confined and the kernel's places refused exactly as for reads and writes
 * (`confined.ts`: the walk, `..` above the root, symlinks followed inside it, /proc, /sys,
 * /dev and pseudo file systems), and each change acts as the machine's user
 * (`file-user.ts`): write and search permission on the directory changed, the sticky
 * bit's rule for a removal or a rename, and what a read-only mount, an immutable file or
 * a mount point refuses anyone in the machine.
 *
 * Nothing here opens a file the machine controls other than a directory or an `O_PATH`
 * handle, so a FIFO or a device can be stated, removed or renamed (as its owner may with
 * `rm` or `mv`) but never blocks nor reaches its driver.
 */
import { constants, type Stats } from 'node:fs';
import {
  lstat,
  mkdir,
  open,
  rename as renameAt,
  rmdir,
  unlink,
  type FileHandle,
} from 'node:fs/promises';
import { guestId } from '../sandbox/userns.js';
import { at, need, openDir, PathError, refusePseudo, resolveParent } from './confined.js';
import {
  MAY_EXEC,
  MAY_WRITE,
  mayReplace,
  PermissionDeniedError,
  type FileUser,
} from './file-user.js';

const { O_NOFOLLOW } = constants;
/** `O_PATH` (see confined.ts): a handle on the inode that opens nothing. */
const O_PATH = 0o10000000;

/** The machine's root and whom the changes act as. */
export interface Tree {
  root: FileHandle;
  user: FileUser;
}

/** What a stat of one file tells, its owner and group as the machine numbers them. */
export interface FileStat {
  /** Type and permission bits, as `st_mode`. */
  mode: number;
  size: number;
  uid: number;
  gid: number;
  atime: Date;
  mtime: Date;
}

/** The stats of `st` as the machine sees them: its ids are the host's shifted (sandbox/userns.ts). */
export function fileStat(st: Stats): FileStat {
  return {
    mode: st.mode,
    size: st.size,
    uid: guestId(st.uid),
    gid: guestId(st.gid),
    atime: st.atime,
    mtime: st.mtime,
  };
}

/**
 * What refuses the machine's user too, said as a refusal of `action`, not a failure: a
 * read-only file system, a mount point (a file or directory bound into the machine
 * cannot be removed or renamed over), an immutable or append-only file or directory.
 */
export function refusedBy(path: string, action: PermissionDeniedError['action']) {
  return (err: NodeJS.ErrnoException): never => {
    if (err.code === 'EROFS')
      throw new PermissionDeniedError(path, action, 'a read-only file system');
    if (err.code === 'EBUSY') throw new PermissionDeniedError(path, action, 'a mount');
    if (err.code === 'EPERM') throw new PermissionDeniedError(path, action, 'immutable');
    throw err;
  };
}

/** The entry `name` of `dir`, or undefined when there is none. */
function entry(dir: FileHandle, name: string): Promise<Stats | undefined> {
  return lstat(at(dir, name)).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return undefined;
    throw err;
  });
}

/**
 * The stats of `path`, through a symlink in its last place when `follow` (else the
 * link's own). Looked at through an `O_PATH` handle, which opens nothing, and refused
 * when it sits on a pseudo file system.
 */
export async function statPath(
  t: Tree,
  path: string,
  opts: { follow: boolean },
): Promise<FileStat> {
  const { parent, name } = await resolveParent(t.root, path, {
    user: t.user,
    followLast: opts.follow,
  });
  try {
    if (name === undefined) return fileStat(await parent.stat());
    const h = await open(at(parent, name), O_PATH | O_NOFOLLOW).catch(
      (err: NodeJS.ErrnoException) => {
        if (err.code === 'ENOENT') throw new PathError('ENOENT', `${path}: no such file`);
        throw err;
      },
    );
    try {
      const st = await h.stat();
      // A symlink's statfs would follow it: only what it is, not where it leads, is told.
      if (!st.isSymbolicLink()) await refusePseudo(h, path);
      return fileStat(st);
    } finally {
      await h.close();
    }
  } finally {
    await parent.close();
  }
}

/**
 * Makes the directory `path` (its parent must exist) with permission bits `mode`,
 * owned by the machine's user; the user must write and search the parent.
 */
export async function makeDir(t: Tree, path: string, mode: number): Promise<void> {
  const { parent, name } = await resolveParent(t.root, path, { user: t.user, followLast: false });
  try {
    if (name === undefined) throw new PathError('EEXIST', `${path} exists`);
    await need(parent, t.user, MAY_WRITE | MAY_EXEC, path, 'write');
    await mkdir(at(parent, name), { mode: 0o700 }).catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'EEXIST') throw new PathError('EEXIST', `${path} exists`);
      return refusedBy(path, 'write')(err);
    });
    // Through the handle of what was made, so that what is chowned is what was made.
    const dir = await openDir(at(parent, name), path);
    try {
      await dir.chown(t.user.uid, t.user.gid);
      await dir.chmod(mode & 0o7777);
    } finally {
      await dir.close();
    }
  } finally {
    await parent.close();
  }
}

/**
 * Removes `path`: a file of any kind (a symlink itself, never its target) unless `dir`,
 * else an empty directory. The user must write and search its directory, and the
 * sticky bit's rule must allow it.
 */
export async function removePath(t: Tree, path: string, opts: { dir: boolean }): Promise<void> {
  const { parent, name } = await resolveParent(t.root, path, { user: t.user, followLast: false });
  try {
    if (name === undefined) throw new PermissionDeniedError(path, 'remove', 'the root');
    const st = await entry(parent, name);
    if (!st) throw new PathError('ENOENT', `${path}: no such file or directory`);
    if (opts.dir && !st.isDirectory()) {
      throw new PathError('ENOTDIR', `${path} is not a directory`);
    }
    if (!opts.dir && st.isDirectory()) throw new PathError('EISDIR', `${path} is a directory`);
    await need(parent, t.user, MAY_WRITE | MAY_EXEC, path, 'remove');
    if (!mayReplace(await parent.stat(), st, t.user)) {
      throw new PermissionDeniedError(path, 'remove', "the sticky directory's rule");
    }
    await (opts.dir ? rmdir : unlink)(at(parent, name)).catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOTEMPTY' || err.code === 'EEXIST') {
        throw new PathError('ENOTEMPTY', `${path} is not empty`);
      }
      return refusedBy(path, 'remove')(err);
    });
  } finally {
    await parent.close();
  }
}

/**
 * Renames `from` to `to` (a symlink itself, never its target), which must not exist
 * yet, as SFTP's rename asks. The user must write and search both directories, the
 * sticky bit's rule must allow moving `from`, and a directory moved to another parent
 * must be the user's to write (its `..` changes). Between the look at `to` and the
 * rename, microseconds, the machine could make `to`; it would then be replaced, as by
 * its own `mv`.
 */
export async function renamePath(t: Tree, from: string, to: string): Promise<void> {
  const src = await resolveParent(t.root, from, { user: t.user, followLast: false });
  try {
    const dst = await resolveParent(t.root, to, { user: t.user, followLast: false });
    try {
      if (src.name === undefined) throw new PermissionDeniedError(from, 'rename', 'the root');
      if (dst.name === undefined) throw new PathError('EEXIST', `${to} exists`);
      const st = await entry(src.parent, src.name);
      if (!st) throw new PathError('ENOENT', `${from}: no such file or directory`);
      if (await entry(dst.parent, dst.name)) throw new PathError('EEXIST', `${to} exists`);
      await need(src.parent, t.user, MAY_WRITE | MAY_EXEC, from, 'rename');
      await need(dst.parent, t.user, MAY_WRITE | MAY_EXEC, to, 'rename');
      const srcDir = await src.parent.stat();
      if (!mayReplace(srcDir, st, t.user)) {
        throw new PermissionDeniedError(from, 'rename', "the sticky directory's rule");
      }
      const dstDir = await dst.parent.stat();
      const moved = srcDir.ino !== dstDir.ino || srcDir.dev !== dstDir.dev;
      if (st.isDirectory() && moved) {
        const dir = await openDir(at(src.parent, src.name), from);
        try {
          await need(dir, t.user, MAY_WRITE, from, 'rename');
        } finally {
          await dir.close();
        }
      }
      await renameAt(at(src.parent, src.name), at(dst.parent, dst.name)).catch(
        (err: NodeJS.ErrnoException) => {
          // A volume and the machine's overlay are apart: mv would copy, a rename cannot.
          if (err.code === 'EXDEV') {
            throw new PathError('EXDEV', `${from} and ${to} are on different file systems`);
          }
          // A directory into itself.
          if (err.code === 'EINVAL') throw new PathError('EINVAL', `${to} is inside ${from}`);
          if (err.code === 'ENOTEMPTY' || err.code === 'EEXIST') {
            throw new PathError('EEXIST', `${to} exists`);
          }
          return refusedBy(from, 'rename')(err);
        },
      );
    } finally {
      await dst.parent.close();
    }
  } finally {
    await src.parent.close();
  }
}
