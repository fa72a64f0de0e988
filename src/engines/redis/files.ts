/**
 * File work of the engine, which runs as root next to servers that run as the service
 * user. Whatever that user controls (the `data` and `run` directories) may hold symlinks
 * or be changed at any moment by a compromised server, so root never follows a link
 * there: reads open with O_NOFOLLOW, ownership changes use lchown, and a copied tree is
 * first taken over (root-owned, 0700, links removed) before root works in it.
 */
import { constants } from 'node:fs';
import {
  chmod,
  chown,
  copyFile,
  lchown,
  lstat,
  mkdir,
  open,
  readdir,
  rename,
  rm,
  type FileHandle,
} from 'node:fs/promises';
import path from 'node:path';

const asRoot = () => process.getuid?.() === 0;

/** Owner of a file or directory: uid and gid (applied only when pier runs as root). */
export interface Owner {
  uid: number;
  gid: number;
}

/** Root, with the service user's group: files the server may read but not change. */
export const rootWithGroup = (gid: number): Owner => ({ uid: 0, gid });

/**
 * Writes `data` under a fresh temporary name (O_EXCL: never through a planted link) and
 * renames it over `file`, so a crash never leaves half a file.
 */
export async function writeAtomic(
  file: string,
  data: string | Buffer,
  mode: number,
  owner?: Owner,
): Promise<void> {
  const tmp = `${file}.tmp`;
  await rm(tmp, { force: true });
  const handle = await open(tmp, 'wx', mode);
  try {
    await handle.writeFile(data);
    await handle.chmod(mode);
    if (owner && asRoot()) await handle.chown(owner.uid, owner.gid);
  } finally {
    await handle.close();
  }
  await rename(tmp, file);
}

/**
 * A directory of `mode` owned by `owner` (created if missing). Only for directories whose
 * parent the service user cannot write (the volume's top, /tmp's sticky entries of root),
 * so that nothing can be swapped in between the check and the change.
 */
export async function ownedDir(dir: string, owner: Owner | undefined, mode = 0o700): Promise<void> {
  await mkdir(dir, { recursive: true, mode });
  const st = await lstat(dir);
  if (!st.isDirectory()) throw new Error(`${dir} is not a directory`);
  await chmod(dir, mode);
  if (owner && asRoot()) await chown(dir, owner.uid, owner.gid);
}

/** Opens `file` for reading without following a symlink at its last component. */
export function openNoFollow(file: string, flags = constants.O_RDONLY): Promise<FileHandle> {
  return open(file, flags | constants.O_NOFOLLOW);
}

/**
 * Copies the regular file `src` to the new file `dst` (a reflink where the filesystem can),
 * keeping its times. `src` is opened without following links and must belong to
 * `expectUid` when given: a server can only point root at files it owns itself.
 */
export async function copyRegularFile(src: string, dst: string, expectUid?: number): Promise<void> {
  const handle = await openNoFollow(src);
  try {
    const st = await handle.stat();
    if (!st.isFile()) throw new Error(`${src} is not a regular file`);
    if (expectUid !== undefined && st.uid !== expectUid) {
      throw new Error(`${src} does not belong to the service user`);
    }
    // The descriptor's /proc link reopens exactly the inode checked above.
    await copyFile(
      `/proc/self/fd/${handle.fd}`,
      dst,
      constants.COPYFILE_EXCL | constants.COPYFILE_FICLONE,
    );
    const out = await open(dst, 'r+');
    try {
      await out.utimes(st.atime, st.mtime);
    } finally {
      await out.close();
    }
  } finally {
    await handle.close();
  }
}

/**
 * Takes over a copied tree before root works in it: every directory becomes root's with
 * mode 0700 (top-down, so nothing can be swapped in below a directory already taken), and
 * every entry that is not a plain file (symlinks, sockets, fifos, extra hard links) is
 * removed: none of them is data.
 */
export async function seizeTree(dir: string): Promise<void> {
  const st = await lstat(dir);
  if (!st.isDirectory()) throw new Error(`${dir} is not a directory`);
  if (asRoot()) await chown(dir, 0, 0);
  await chmod(dir, 0o700);
  for (const name of await readdir(dir)) {
    const p = path.join(dir, name);
    const s = await lstat(p);
    if (s.isDirectory()) await seizeTree(p);
    else if (!s.isFile() || s.nlink > 1) await rm(p, { force: true });
  }
}

/** Gives a seized tree to `owner`, bottom-up, so each directory is released last. */
export async function releaseTree(dir: string, owner: Owner): Promise<void> {
  if (!asRoot()) return;
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const p = path.join(dir, entry.name);
    if (entry.isDirectory()) await releaseTree(p, owner);
    else await lchown(p, owner.uid, owner.gid);
  }
  await lchown(dir, owner.uid, owner.gid);
}

/** Makes `dir` root's own and closed (0700) while root prepares what is inside. */
export async function closeDir(dir: string): Promise<void> {
  if (asRoot()) await chown(dir, 0, 0);
  await chmod(dir, 0o700);
}

/** fsyncs a file or directory (a read-only descriptor is enough on Linux). */
export async function fsyncPath(p: string): Promise<void> {
  const handle = await openNoFollow(p);
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}
