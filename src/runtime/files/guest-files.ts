/**
 * Reading, writing and listing files of a running machine from the host (spec 4.9
 * files routes), every path confined to the machine's root by `confined.ts`. The root is
 * `/proc/<pid>/root` of a process of the machine, so the files are the machine's own
 * view: its overlay, its volumes and its `/tmp`. `/proc`, `/sys`, `/dev` and whatever
 * sits on a pseudo file system are refused, and so is every file that is neither regular
 * nor a directory (see confined.ts); nothing here can block on a FIFO or open a device.
 */
import { guestId, hostId } from '../sandbox/userns.js';
import { constants, type ReadStream } from 'node:fs';
import { lstat, open, readdir, readlink, rename, rm, type FileHandle } from 'node:fs/promises';
import {
  at,
  openDir,
  openRegular,
  PathError,
  refusePseudo,
  resolveParent,
  SpecialFileError,
  specialKind,
} from './confined.js';

const { O_RDONLY, O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW, O_DIRECTORY } = constants;

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

/** The files of one machine, through the root of one of its processes. */
export class GuestFiles {
  private constructor(private readonly root: FileHandle) {}

  /** Opens the root of process `pid` (a process of the machine, host pid). */
  static of(pid: number): Promise<GuestFiles> {
    return GuestFiles.atDir(`/proc/${pid}/root`);
  }

  /** Opens the directory `dir` of the host as the root (tests, stopped machines). */
  static async atDir(dir: string): Promise<GuestFiles> {
    // No O_NOFOLLOW here: /proc/<pid>/root is itself a (magic) link, and it is ours to follow.
    return new GuestFiles(await open(dir, O_RDONLY | O_DIRECTORY));
  }

  close(): Promise<void> {
    return this.root.close();
  }

  /**
   * A stream of the regular file at `path` and its size; throws FileTooLargeError past
   * `cap` bytes, SpecialFileError for a FIFO, socket or device (at once, never blocking),
   * ProtectedPathError in the kernel's places. Symlinks on the way, and the file's own,
   * are followed inside the root.
   */
  async read(path: string, cap: number): Promise<{ size: number; stream: ReadStream }> {
    const { parent, name } = await resolveParent(this.root, path);
    try {
      if (name === undefined) throw new PathError('EISDIR', `${path} is a directory`);
      const { file, stats } = await openRegular(parent, name, path);
      if (stats.size > cap) {
        await file.close();
        throw new FileTooLargeError(stats.size, cap);
      }
      return { size: stats.size, stream: file.createReadStream({ autoClose: true }) };
    } finally {
      await parent.close();
    }
  }

  /**
   * Writes `data` to `path` (missing directories made), replacing it atomically: the
   * bytes go to a new file beside it that is then renamed over it, so a reader never sees
   * half a file and a symlink in the file's place is replaced, never followed. Mode
   * `mode`, owner `uid:gid` (the machine's user, as the machine numbers it). Returns the
   * bytes written.
   */
  async write(
    path: string,
    data: AsyncIterable<Buffer>,
    opts: { mode: number; uid: number; gid: number; cap: number },
  ): Promise<number> {
    const owner = { uid: hostId(opts.uid), gid: hostId(opts.gid) };
    const { parent, name } = await resolveParent(this.root, path, {
      createDirs: true,
      followLast: false,
      owner,
    });
    const temp = `.pier-upload-${process.pid}-${Date.now().toString(36)}`;
    try {
      if (name === undefined) throw new PathError('EISDIR', `${path} is a directory`);
      const existing = await lstat(at(parent, name)).catch(() => undefined);
      if (existing?.isDirectory()) throw new PathError('EISDIR', `${path} is a directory`);
      // A FIFO, socket or device is never replaced (nor opened: the bytes go to a new file).
      if (existing && !existing.isFile() && !existing.isSymbolicLink()) {
        throw new SpecialFileError(path, specialKind(existing));
      }
      const file = await open(
        at(parent, temp),
        O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW,
        opts.mode,
      );
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
      await rename(at(parent, temp), at(parent, name));
      return size;
    } catch (err) {
      await rm(at(parent, temp), { force: true }).catch(() => {});
      throw err;
    } finally {
      await parent.close();
    }
  }

  /** The entries of the directory at `path`, sorted by name. */
  async list(path: string): Promise<DirEntry[]> {
    const { parent, name } = await resolveParent(this.root, path);
    let dir: FileHandle = parent;
    try {
      if (name !== undefined) {
        dir = await openDir(at(parent, name), path);
        await refusePseudo(dir, path);
      }
      const names = await readdir(`/proc/self/fd/${dir.fd}`);
      const entries: DirEntry[] = [];
      for (const n of names.sort()) {
        const st = await lstat(at(dir, n)).catch(() => undefined);
        if (!st) continue; // removed meanwhile
        const type = st.isFile()
          ? 'file'
          : st.isDirectory()
            ? 'dir'
            : st.isSymbolicLink()
              ? 'symlink'
              : 'other';
        const entry: DirEntry = {
          name: n,
          type,
          size: st.size,
          mode: `0${(st.mode & 0o7777).toString(8).padStart(3, '0')}`,
          // As the machine sees them: its ids are the host's shifted (sandbox/userns.ts).
          uid: guestId(st.uid),
          gid: guestId(st.gid),
          modifiedAt: st.mtime.toISOString(),
        };
        if (type === 'symlink') {
          entry.target = await readlink(at(dir, n)).catch(() => '');
        }
        entries.push(entry);
      }
      return entries;
    } finally {
      if (dir !== parent) await dir.close();
      await parent.close();
    }
  }
}
