/**
 * Files of a running machine (spec 4.9 files routes): raw bytes of one file, a file
 * written whole, a directory listing. Paths are the machine's own (absolute, its volumes
 * and /tmp included) and confined to its filesystem: `..` above its root and symlinks
 * that lead out are refused (400), never followed onto the host. Reads and writes are
 * capped at FILE_CAP_BYTES (413 `too-large`); a write lands atomically and belongs to
 * the machine's user. A suspended machine is not woken: its files are read from the host.
 * The kernel's places (`/proc`, `/sys`, `/dev`, any pseudo file system) are 403
 * `forbidden`; a FIFO, socket or device is 422 `unprocessable`, answered at once (nothing
 * here waits on a file the machine controls). Every operation acts as the machine's user
 * (the user of its main process): what that user may not do is 403
 * `file-permission-denied`.
 *
 * Beside the routes' three, the SSH gateway's SFTP (ssh-gateway/sftp.ts) reads files at
 * offsets, states one path, makes and removes directories, removes and renames files,
 * under the same rules (runtime/files/guest-tree.ts).
 */
import type { ReadStream } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import { ApiError, badRequest } from '../../errors/api-error.js';
import {
  PathError,
  PathEscapeError,
  ProtectedPathError,
  SpecialFileError,
} from '../../runtime/files/confined.js';
import { PermissionDeniedError } from '../../runtime/files/file-user.js';
import {
  FileTooLargeError,
  GuestFiles,
  type DirEntry,
  type StatEntry,
} from '../../runtime/files/guest-files.js';
import type { FileStat } from '../../runtime/files/guest-tree.js';
import type { ServiceContext } from '../context.js';
import { guestMachine, reachGuest } from './guest-access.js';

/** The most one read or write may move (64 MiB); larger transfers belong in a volume or bucket. */
export const FILE_CAP_BYTES = 64 * 1024 * 1024;

/**
 * Runs `fn` on the files of the organization's running machine `id` (and the working
 * directory of its main process, where paths relative to it start).
 */
async function withFiles<T>(
  ctx: ServiceContext,
  orgId: string,
  id: string,
  fn: (files: GuestFiles, cwd: string) => Promise<T>,
): Promise<T> {
  const row = await guestMachine(ctx, orgId, id);
  const guest = await reachGuest(ctx, row, { wake: false });
  if (guest.filesReachable === false) {
    throw new ApiError(
      'unprocessable',
      `Machine ${id} runs under gVisor (runsc), whose files the files API cannot reach; use a session (exec) instead.`,
    );
  }
  const files = await GuestFiles.of(guest.initPid, guest.mainPid).catch(() => {
    throw new ApiError('machine-stopped', `Machine ${id} is not running; start it first.`);
  });
  try {
    return await fn(files, guest.cwd);
  } catch (err) {
    throw asApiError(err, id);
  } finally {
    await files.close();
  }
}

function asApiError(err: unknown, id: string): unknown {
  if (err instanceof PathEscapeError) {
    return badRequest([{ path: 'path', message: "leads outside the machine's filesystem" }]);
  }
  if (err instanceof ProtectedPathError) return new ApiError('forbidden', `${err.message}.`);
  if (err instanceof PermissionDeniedError) {
    return new ApiError('file-permission-denied', `${err.message}.`, { action: err.action });
  }
  if (err instanceof SpecialFileError) return new ApiError('unprocessable', `${err.message}.`);
  if (err instanceof FileTooLargeError) {
    return new ApiError('too-large', `${err.message}.`, { limit: err.cap });
  }
  if (err instanceof PathError) {
    if (err.code === 'ENOENT') return new ApiError('not-found', `${err.message} (machine ${id}).`);
    if (err.code === 'EEXIST') return new ApiError('already-exists', `${err.message}.`);
    if (err.code === 'ENOTEMPTY') return new ApiError('conflict', `${err.message}.`);
    if (err.code === 'EXDEV') return new ApiError('unprocessable', `${err.message}.`);
    return badRequest([{ path: 'path', message: err.message }]);
  }
  return err;
}

export function readGuestFile(
  ctx: ServiceContext,
  orgId: string,
  id: string,
  path: string,
): Promise<{ size: number; stream: ReadStream }> {
  return withFiles(ctx, orgId, id, (files) => files.read(path, FILE_CAP_BYTES));
}

export function writeGuestFile(
  ctx: ServiceContext,
  orgId: string,
  id: string,
  path: string,
  body: AsyncIterable<Buffer>,
  mode: number,
): Promise<{ path: string; size: number }> {
  return withFiles(ctx, orgId, id, async (files) => {
    const size = await files.write(path, body, { mode, cap: FILE_CAP_BYTES });
    return { path, size };
  });
}

export function listGuestDir(
  ctx: ServiceContext,
  orgId: string,
  id: string,
  path: string,
): Promise<{ path: string; entries: DirEntry[] }> {
  return withFiles(ctx, orgId, id, async (files) => ({ path, entries: await files.list(path) }));
}

/**
 * The regular file at `path` opened for reading at offsets (SFTP), with the checks and
 * cap of `readGuestFile`; the caller closes it.
 */
export function openGuestFile(
  ctx: ServiceContext,
  orgId: string,
  id: string,
  path: string,
): Promise<{ size: number; file: FileHandle }> {
  return withFiles(ctx, orgId, id, (files) => files.openRead(path, FILE_CAP_BYTES));
}

/** A directory's entries with their whole stats (SFTP's listing). */
export function listGuestStats(
  ctx: ServiceContext,
  orgId: string,
  id: string,
  path: string,
): Promise<StatEntry[]> {
  return withFiles(ctx, orgId, id, (files) => files.listStats(path));
}

/** The stats of one path (a symlink's own unless `follow`). */
export function statGuestPath(
  ctx: ServiceContext,
  orgId: string,
  id: string,
  path: string,
  follow: boolean,
): Promise<FileStat> {
  return withFiles(ctx, orgId, id, (files) => files.stat(path, { follow }));
}

/** Makes one directory, the machine's user's, with permission bits `mode`. */
export function makeGuestDir(
  ctx: ServiceContext,
  orgId: string,
  id: string,
  path: string,
  mode: number,
): Promise<void> {
  return withFiles(ctx, orgId, id, (files) => files.mkdir(path, mode));
}

/** Removes a file (not `dir`) or an empty directory (`dir`). */
export function removeGuestPath(
  ctx: ServiceContext,
  orgId: string,
  id: string,
  path: string,
  dir: boolean,
): Promise<void> {
  return withFiles(ctx, orgId, id, (files) => files.remove(path, { dir }));
}

/** Renames `from` to `to`, which must not exist. */
export function renameGuestPath(
  ctx: ServiceContext,
  orgId: string,
  id: string,
  from: string,
  to: string,
): Promise<void> {
  return withFiles(ctx, orgId, id, (files) => files.rename(from, to));
}

/** Where paths relative to the machine's working directory start: its main process's. */
export function guestWorkingDir(ctx: ServiceContext, orgId: string, id: string): Promise<string> {
  return withFiles(ctx, orgId, id, async (_files, cwd) => cwd);
}
