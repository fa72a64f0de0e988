/**
 * Reading, writing and listing files of a running machine from the host (spec 4.9
 * files routes), every path confined to the machine's root by `confined.ts`. The root is
 * `/proc/<pid>/root` of a process of the machine, so the files are the machine's own
 * view: its overlay, its volumes and its `/tmp`. `/proc`, `/sys`, `/dev` and whatever
 * sits on a pseudo file system are refused, and so is every file that is neither regular
 * nor a directory (see confined.ts); nothing here can block on a FIFO or open a device.
 *
 * Every operation acts with the rights of the machine's user (`file-user.ts`): the walk
 * needs search permission on each directory, a read needs read permission on the file,
 * a listing read and search on the directory, a write write and search on the directory
 * (the sticky bit's rule included) and write permission on the file it replaces.
 */
import { constants, type ReadStream, type Stats } from 'node:fs';
import {
  lstat,
  open,
  readdir,
  readFile,
  readlink,
  rename,
  rm,
  type FileHandle,
} from 'node:fs/promises';
import { guestId, hostId } from '../sandbox/userns.js';
import {
  at,
  need,
  openDir,
  openRegular,
  PathError,
  refusePseudo,
  resolveParent,
  SpecialFileError,
  specialKind,
} from './confined.js';
import {
  fileStat,
  makeDir,
  refusedBy,
  removePath,
  renamePath,
  statPath,
  type FileStat,
  type Tree,
} from './guest-tree.js';
import {
  imageGroups,
  MAY_EXEC,
  MAY_READ,
  MAY_WRITE,
  mayAccess,
  mayReplace,
  PermissionDeniedError,
  userOfStatus,
  type FileUser,
} from './file-user.js';

const { O_RDONLY, O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW, O_DIRECTORY } = constants;

/** The listing's type of a file of mode `mode`. */
export function typeOf(mode: number): DirEntry['type'] {
  switch (mode & constants.S_IFMT) {
    case constants.S_IFREG:
      return 'file';
    case constants.S_IFDIR:
      return 'dir';
    case constants.S_IFLNK:
      return 'symlink';
    default:
      return 'other';
  }
}

/** One entry of a directory listing with its whole stats. */
export interface StatEntry {
  name: string;
  stat: FileStat;
  /** Where a symlink points, as written in it. */
  target?: string;
}

/** One entry of a directory listing. */
export interface DirEntry {
  name: string;
  type: 'file' | 'dir' | 'symlink' | 'other';
  size: number;
  /** Permission bits, as octal text (`0644`). */
  mode: string;
  uid: number;
  gid: number;
  modifiedAt: string;
  /** Where a symlink points, as written in it. */
  target?: string;
}

/** A file that is larger than the caller's cap. */
export class FileTooLargeError extends Error {
  constructor(
    readonly size: number,
    readonly cap: number,
  ) {
    super(`the file holds ${size} bytes; at most ${cap} may be read at once`);
    this.name = 'FileTooLargeError';
  }
}

/** The most of the machine's /etc/passwd or /etc/group read to learn its user's groups. */
const ACCOUNTS_CAP = 1024 * 1024;

/** The files of one machine, through the root of one of its processes, as its user. */
export class GuestFiles {
  private constructor(
    private readonly root: FileHandle,
    /** Whom every operation acts as. */
    readonly user: FileUser,
  ) {}

  /**
   * Opens the root of process `pid` (a process of the machine, host pid), acting as the
   * user of process `mainPid` (the machine's main process): its uid, gid, groups and
   * capabilities, plus the groups the machine's /etc/group lists that user in.
   */
  static async of(pid: number, mainPid: number): Promise<GuestFiles> {
    // No O_NOFOLLOW here: /proc/<pid>/root is itself a (magic) link, and it is ours to follow.
    const root = await open(`/proc/${pid}/root`, O_RDONLY | O_DIRECTORY);
    try {
      const status = await readFile(`/proc/${mainPid}/status`, 'utf8');
      const main = userOfStatus(status);
      const [passwd, group] = await Promise.all([
        accounts(root, '/etc/passwd'),
        accounts(root, '/etc/group'),
      ]);
      const extra = imageGroups(passwd, group, guestId(main.uid)).map(hostId);
      return new GuestFiles(root, userOfStatus(status, extra));
    } catch (err) {
      await root.close();
      throw err;
    }
  }

  /** Opens the directory `dir` of the host as the root, acting as `user` (tests, stopped machines). */
  static async atDir(dir: string, user: FileUser): Promise<GuestFiles> {
    return new GuestFiles(await open(dir, O_RDONLY | O_DIRECTORY), user);
  }

  close(): Promise<void> {
    return this.root.close();
  }

  /**
   * A stream of the regular file at `path` and its size; throws FileTooLargeError past
   * `cap` bytes, SpecialFileError for a FIFO, socket or device (at once, never blocking),
   * ProtectedPathError in the kernel's places, PermissionDeniedError when the machine's
   * user may not read it. Symlinks on the way, and the file's own, are followed inside
   * the root.
   */
  async read(path: string, cap: number): Promise<{ size: number; stream: ReadStream }> {
    const { size, file } = await this.openRead(path, cap);
    return { size, stream: file.createReadStream({ autoClose: true }) };
  }

  /**
   * The regular file at `path` opened for reading, as `read` opens it (the same checks
   * and cap), for a caller that reads it at offsets (SFTP) and closes it.
   */
  async openRead(path: string, cap: number): Promise<{ size: number; file: FileHandle }> {
    const { parent, name } = await resolveParent(this.root, path, { user: this.user });
    try {
      if (name === undefined) throw new PathError('EISDIR', `${path} is a directory`);
      const { file, stats } = await openRegular(parent, name, path);
      if (!mayAccess(stats, this.user, MAY_READ)) {
        await file.close();
        throw new PermissionDeniedError(path, 'read');
      }
      if (stats.size > cap) {
        await file.close();
        throw new FileTooLargeError(stats.size, cap);
      }
      return { size: stats.size, file };
    } finally {
      await parent.close();
    }
  }

  /**
   * Writes `data` to `path` (missing directories made), replacing it atomically: the
   * bytes go to a new file beside it that is then renamed over it, so a reader never sees
   * half a file and a symlink in the file's place is replaced, never followed. Mode
   * `mode`; the file and the directories made belong to the machine's user. Returns the
   * bytes written. The user must be able to write the directory and the file replaced;
   * that is checked before the bytes are read and again just before the rename (between
   * that last look and the rename, microseconds, the machine could put another file at
   * the name; it would then be replaced).
   */
  async write(
    path: string,
    data: AsyncIterable<Buffer>,
    opts: { mode: number; cap: number },
  ): Promise<number> {
    const owner = { uid: this.user.uid, gid: this.user.gid };
    const { parent, name } = await resolveParent(this.root, path, {
      createDirs: true,
      followLast: false,
      owner,
      user: this.user,
    }).catch(refusedBy(path, 'write'));
    const temp = `.pier-upload-${process.pid}-${Date.now().toString(36)}`;
    let made = false;
    try {
      if (name === undefined) throw new PathError('EISDIR', `${path} is a directory`);
      await need(parent, this.user, MAY_WRITE | MAY_EXEC, path, 'write');
      await this.mayReplace(parent, name, path);
      const file = await open(
        at(parent, temp),
        O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW,
        opts.mode,
      ).catch(refusedBy(path, 'write'));
      made = true;
      let size = 0;
      try {
        for await (const chunk of data) {
          size += chunk.length;
          if (size > opts.cap) throw new FileTooLargeError(size, opts.cap);
          await file.write(chunk);
        }
        await file.chmod(opts.mode);
        await file.chown(owner.uid, owner.gid);
        await file.sync();
      } finally {
        await file.close();
      }
      await this.mayReplace(parent, name, path);
      // A file bound into the machine (a mount point) or an immutable one is refused.
      await rename(at(parent, temp), at(parent, name)).catch(refusedBy(path, 'replace'));
      return size;
    } catch (err) {
      if (made) await rm(at(parent, temp), { force: true }).catch(() => {});
      throw err;
    } finally {
      await parent.close();
    }
  }

  /**
   * Throws unless the entry `name` of `parent` may be replaced by a new file: it is no
   * directory nor special file, the user may write it, and the sticky bit allows it.
   */
  private async mayReplace(parent: FileHandle, name: string, path: string): Promise<void> {
    const existing: Stats | undefined = await lstat(at(parent, name)).catch(() => undefined);
    if (!existing) return;
    if (existing.isDirectory()) throw new PathError('EISDIR', `${path} is a directory`);
    // A FIFO, socket or device is never replaced (nor opened: the bytes go to a new file).
    if (!existing.isFile() && !existing.isSymbolicLink()) {
      throw new SpecialFileError(path, specialKind(existing));
    }
    if (existing.isFile() && !mayAccess(existing, this.user, MAY_WRITE)) {
      throw new PermissionDeniedError(path, 'write');
    }
    if (!mayReplace(await parent.stat(), existing, this.user)) {
      throw new PermissionDeniedError(path, 'replace', "the sticky directory's rule");
    }
  }

  /** The entries of the directory at `path`, sorted by name. */
  async list(path: string): Promise<DirEntry[]> {
    return (await this.listStats(path)).map(({ name, stat, target }) => ({
      name,
      type: typeOf(stat.mode),
      size: stat.size,
      mode: `0${(stat.mode & 0o7777).toString(8).padStart(3, '0')}`,
      uid: stat.uid,
      gid: stat.gid,
      modifiedAt: stat.mtime.toISOString(),
      ...(target !== undefined ? { target } : {}),
    }));
  }

  /** The entries of the directory at `path`, sorted by name, with their whole stats. */
  async listStats(path: string): Promise<StatEntry[]> {
    const { parent, name } = await resolveParent(this.root, path, { user: this.user });
    let dir: FileHandle = parent;
    try {
      if (name !== undefined) {
        dir = await openDir(at(parent, name), path);
        await refusePseudo(dir, path);
      }
      // Names need read permission, their types and sizes search permission.
      await need(dir, this.user, MAY_READ | MAY_EXEC, path, 'list');
      const names = await readdir(`/proc/self/fd/${dir.fd}`);
      const entries: StatEntry[] = [];
      for (const n of names.sort()) {
        const st = await lstat(at(dir, n)).catch(() => undefined);
        if (!st) continue; // removed meanwhile
        const entry: StatEntry = {
          name: n,
          stat: fileStat(st),
        };
        if (st.isSymbolicLink()) entry.target = await readlink(at(dir, n)).catch(() => '');
        entries.push(entry);
      }
      return entries;
    } finally {
      if (dir !== parent) await dir.close();
      await parent.close();
    }
  }

  /** The stats of `path` (see guest-tree.ts). */
  stat(path: string, opts: { follow: boolean }): Promise<FileStat> {
    return statPath(this.tree(), path, opts);
  }

  /** Makes the directory `path` (see guest-tree.ts). */
  mkdir(path: string, mode: number): Promise<void> {
    return makeDir(this.tree(), path, mode);
  }

  /** Removes the file, or the empty directory, at `path` (see guest-tree.ts). */
  remove(path: string, opts: { dir: boolean }): Promise<void> {
    return removePath(this.tree(), path, opts);
  }

  /** Renames `from` to `to`, which must not exist (see guest-tree.ts). */
  rename(from: string, to: string): Promise<void> {
    return renamePath(this.tree(), from, to);
  }

  private tree(): Tree {
    return { root: this.root, user: this.user };
  }
}

/**
 * The text of the machine's account file `file` (its user's name and groups), read as
 * host root through the same confined walk; empty when it is missing, odd or too large.
 */
async function accounts(root: FileHandle, file: string): Promise<string> {
  try {
    const { parent, name } = await resolveParent(root, file);
    try {
      if (name === undefined) return '';
      const { file: h, stats } = await openRegular(parent, name, file);
      try {
        return stats.size > ACCOUNTS_CAP ? '' : await h.readFile('utf8');
      } finally {
        await h.close();
      }
    } finally {
      await parent.close();
    }
  } catch {
    return '';
  }
}
