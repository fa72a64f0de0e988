/**
 * File access of a root process inside directories the service user owns. Whatever runs
 * as that user could put a symlink where pier writes or reads (a log, a temp file), and
 * root following it would overwrite, chown or disclose any file of the host. So writes go
 * to a freshly created file (O_EXCL never follows a link) and are renamed into place,
 * ownership and modes are set on the open descriptor, and reads refuse links.
 */
import { constants } from 'node:fs';
import { open, rename, rm } from 'node:fs/promises';
import path from 'node:path';

const { O_RDONLY, O_WRONLY, O_CREAT, O_EXCL, O_APPEND, O_NOFOLLOW, O_DIRECTORY } = constants;

/** Whom files belong to. */
export interface Owner {
  uid: number;
  gid: number;
}

/**
 * Writes `data` to `file` as `owner`'s (mode 0600), atomically: a new temp file renamed
 * over. `durable` also fsyncs the file and its directory, for commit points.
 */
export async function writeOwned(
  owner: Owner,
  file: string,
  data: string | Buffer,
  opts: { durable?: boolean } = {},
): Promise<void> {
  const mode = 0o600;
  const temp = `${file}.tmp`;
  await rm(temp, { force: true });
  const handle = await open(temp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, mode);
  try {
    await handle.writeFile(data);
    await handle.chown(owner.uid, owner.gid);
    await handle.chmod(mode);
    if (opts.durable) await handle.sync();
  } finally {
    await handle.close();
  }
  await rename(temp, file);
  if (opts.durable) await syncDir(path.dirname(file));
}

/** fsyncs a directory, so a rename or create in it survives a power cut. */
export async function syncDir(dir: string): Promise<void> {
  const handle = await open(dir, O_RDONLY | O_DIRECTORY);
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** The text of `file`, or undefined when it is missing; a symlink there is an error. */
export async function readText(file: string): Promise<string | undefined> {
  const handle = await open(file, O_RDONLY | O_NOFOLLOW).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return undefined;
    throw err;
  });
  if (!handle) return undefined;
  try {
    return await handle.readFile('utf8');
  } finally {
    await handle.close();
  }
}

/** Opens `file` for appending (created as `owner`'s 0600 if missing), refusing a symlink. */
export async function openAppend(owner: Owner, file: string) {
  const handle = await open(file, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW, 0o600);
  try {
    await handle.chown(owner.uid, owner.gid);
  } catch (err) {
    await handle.close();
    throw err;
  }
  return handle;
}

/** Gives the directory `dir` (not a symlink) to `owner` with `mode`. */
export async function ownDir(owner: Owner, dir: string, mode = 0o700): Promise<void> {
  const handle = await open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
  try {
    await handle.chown(owner.uid, owner.gid);
    await handle.chmod(mode);
  } finally {
    await handle.close();
  }
}
