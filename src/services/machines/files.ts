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
 */
import type { ReadStream } from 'node:fs';
import { ApiError, badRequest } from '../../errors/api-error.js';
import {
  PathError,
  PathEscapeError,
  ProtectedPathError,
  SpecialFileError,
} from '../../runtime/files/confined.js';
import { PermissionDeniedError } from '../../runtime/files/file-user.js';
import { FileTooLargeError, GuestFiles, type DirEntry } from '../../runtime/files/guest-files.js';
import type { ServiceContext } from '../context.js';
import { guestMachine, reachGuest } from './guest-access.js';

/** The most one read or write may move (64 MiB); larger transfers belong in a volume or bucket. */
export const FILE_CAP_BYTES = 64 * 1024 * 1024;

/** Runs `fn` on the files of the organization's running machine `id`. */
async function withFiles<T>(
  ctx: ServiceContext,
  orgId: string,
  id: string,
  fn: (files: GuestFiles) => Promise<T>,
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
    return await fn(files);
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
