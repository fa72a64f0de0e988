/**
 * The SFTP subsystem of a session channel: the files of the machine a shell of the
 * login would open on (services/ssh-logins.ts shellMachine), through the files service
 * (services/machines/files.ts), so `sftp` and `scp` (OpenSSH 9's speaks SFTP) follow the
 * files route's rules: paths confined to the machine's filesystem, `/proc`, `/sys`, `/dev`
 * and pseudo file systems refused, FIFOs, sockets and devices refused at once, every
 * operation acting as the machine's user, files capped at FILE_CAP_BYTES and written
 * whole and atomically (at the handle's CLOSE, see sftp-upload.ts). A suspended machine
 * is not woken: its files are read from the host, as the files route reads them.
 *
 * Every request is judged anew (the machine's state, its organization), and answered
 * with a status whose message names pier's code (`forbidden: …`); OpenSSH's clients
 * show only the status's own words (`Permission denied`, `Failure`). Relative paths
 * start at the machine's working directory, where a shell starts.
 */
import { constants } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import ssh2, { type Attributes, type SFTPWrapper } from 'ssh2';
import { ApiError } from '../errors/api-error.js';
import type { StatEntry } from '../runtime/files/guest-files.js';
import { fileStat } from '../runtime/files/guest-tree.js';
import {
  FILE_CAP_BYTES,
  guestWorkingDir,
  listGuestStats,
  makeGuestDir,
  openGuestFile,
  removeGuestPath,
  renameGuestPath,
  statGuestPath,
  writeGuestFile,
} from '../services/machines/files.js';
import { shellMachine } from '../services/ssh-logins.js';
import type { LoggedIn } from './logged-in.js';
import { absolute, attrsOf, BadPath, canonical, longname } from './sftp-names.js';
import { Upload, UploadRefused } from './sftp-upload.js';

const { OPEN_MODE, STATUS_CODE } = ssh2.utils.sftp;

/** Handles (files and directories) one SFTP channel may hold open at once. */
export const MAX_HANDLES = 16;
/**
 * Requests one channel may have waiting (OpenSSH keeps 64 in flight): a client past it
 * is not held in memory but cut, its uploads dropped.
 */
export const MAX_WAITING = 256;
/** The most one READ answers (OpenSSH asks 32 KiB at a time). */
const READ_MAX = 256 * 1024;
/** Directory entries per READDIR answer. */
const NAMES_PER_ANSWER = 100;
/** Permission bits a server's umask would keep of what a client asks (OpenSSH sends 0777 for mkdir). */
const UMASK = 0o022;

/** A request this SFTP server does not take: said with this code, status and message. */
class Refused extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

const unsupported = (what: string) =>
  new Refused(STATUS_CODE.OP_UNSUPPORTED, 'unprocessable', `${what} is not offered`);

type Open =
  | { kind: 'read'; path: string; file: FileHandle }
  | {
      kind: 'write';
      path: string;
      upload: Upload;
      written: Promise<unknown>;
      readonly mode: number;
    }
  | { kind: 'dir'; path: string; entries: StatEntry[]; next: number };

/**
 * Serves the SFTP channel `sftp` of login `c`; answers the function that ends it (the
 * channel closed, its uploads dropped and its files closed).
 */
export function serveSftp(c: LoggedIn, sftp: SFTPWrapper): () => void {
  const { ctx, log } = c.deps;
  const orgId = c.login.orgId;
  const handles = new Map<number, Open>();
  let nextHandle = 1;
  let ended = false;

  // The machine, chosen as a shell's; a failure is every request's answer.
  const place = (async () => {
    const org = await c.deps.authenticator.org(orgId);
    if (org?.suspended) throw new ApiError('org-suspended');
    const machine = await shellMachine(ctx, c.login);
    const cwd = await guestWorkingDir(ctx, orgId, machine).catch(() => '/');
    log.info({ id: c.login.id, machine, ip: c.ip }, 'ssh gateway: sftp opened');
    return { machine, cwd };
  })();
  place.catch(() => undefined);

  const end = () => {
    if (ended) return;
    ended = true;
    for (const h of handles.values()) release(h);
    handles.clear();
    sftp.end();
  };

  /** Frees what a handle holds: an upload not closed is dropped (nothing lands). */
  const release = (h: Open) => {
    if (h.kind === 'read') void h.file.close().catch(() => undefined);
    if (h.kind === 'write') h.upload.abort(new Error('the upload was not closed'));
  };

  const handleOf = (h: Open): Buffer => {
    if (handles.size >= MAX_HANDLES) {
      release(h);
      throw new Refused(
        STATUS_CODE.FAILURE,
        'unprocessable',
        `at most ${MAX_HANDLES} files and directories may be open at once`,
      );
    }
    const id = nextHandle++;
    handles.set(id, h);
    const buf = Buffer.alloc(4);
    buf.writeUInt32BE(id);
    return buf;
  };
  const lookup = (handle: Buffer): Open => {
    const h = handle.length === 4 ? handles.get(handle.readUInt32BE()) : undefined;
    if (!h) throw new Refused(STATUS_CODE.FAILURE, 'bad-request', 'no such handle');
    return h;
  };

  /**
   * Runs one request: `fn` answers it, or throws what becomes its status. Requests run
   * one at a time, in the order they came, as OpenSSH's sftp-server runs them: its
   * client takes READ answers out of order as a sign to distrust the file's end (and
   * cuts a download short). Answers after the channel ended go nowhere.
   */
  let queue: Promise<unknown> = place;
  let waiting = 0;
  const serve = (reqId: number, fn: (where: { machine: string; cwd: string }) => Promise<void>) => {
    if (ended) return;
    if (++waiting > MAX_WAITING) {
      log.warn({ id: c.login.id, ip: c.ip }, 'ssh gateway: sftp client sent too many requests');
      return end();
    }
    queue = queue
      .then(() => place)
      .then(fn)
      .catch((err: unknown) => {
        if (ended) return;
        const { status, message } = statusOf(err);
        if (
          status === STATUS_CODE.FAILURE &&
          !(err instanceof ApiError || err instanceof Refused || err instanceof UploadRefused)
        ) {
          log.error({ err }, 'ssh gateway: sftp request failed');
        }
        sftp.status(reqId, status, message);
      })
      .catch(() => undefined)
      .finally(() => waiting--);
  };
  const ok = (reqId: number) => !ended && sftp.status(reqId, STATUS_CODE.OK);

  sftp.on('REALPATH', (reqId: number, path: string) =>
    serve(reqId, async ({ cwd }) => {
      const p = canonical(cwd, path);
      if (!ended) sftp.name(reqId, [{ filename: p, longname: p, attrs: {} as Attributes }]);
    }),
  );

  const stat = (follow: boolean) => (reqId: number, path: string) =>
    serve(reqId, async ({ machine, cwd }) => {
      const st = await statGuestPath(ctx, orgId, machine, absolute(cwd, path), follow);
      if (!ended) sftp.attrs(reqId, attrsOf(st));
    });
  sftp.on('STAT', stat(true));
  sftp.on('LSTAT', stat(false));

  sftp.on('OPEN', (reqId: number, filename: string, flags: number, attrs: Attributes) =>
    serve(reqId, async ({ machine, cwd }) => {
      const path = absolute(cwd, filename);
      const reads = (flags & OPEN_MODE.READ) !== 0;
      const writes = (flags & OPEN_MODE.WRITE) !== 0;
      if (reads === writes || (flags & OPEN_MODE.APPEND) !== 0) {
        throw unsupported('opening a file for both reading and writing, or to append');
      }
      if (reads) {
        const { file } = await openGuestFile(ctx, orgId, machine, path);
        if (ended) return void file.close().catch(() => undefined);
        return void sftp.handle(reqId, handleOf({ kind: 'read', path, file }));
      }
      // Files are written whole: the bytes written replace the file, truncated or not (scp
      // opens without truncating, to write in place, and sends the whole file). A client
      // writing only a part (a resumed `reput`) is refused at its first WRITE, which is
      // not at offset 0.
      const creates = (flags & OPEN_MODE.CREAT) !== 0;
      const exclusive = creates && (flags & OPEN_MODE.EXCL) !== 0;
      if (!creates || exclusive) {
        const there = await statGuestPath(ctx, orgId, machine, path, false).then(
          () => true,
          (err: unknown) => {
            if (err instanceof ApiError && err.code === 'not-found') return false;
            throw err;
          },
        );
        if (exclusive && there) throw new ApiError('already-exists', `${path} exists.`);
        if (!creates && !there) throw new ApiError('not-found', `${path}: no such file.`);
      }
      const mode = typeof attrs.mode === 'number' ? attrs.mode & 0o7777 & ~UMASK : 0o644;
      const upload = new Upload(FILE_CAP_BYTES);
      const h: Open = { kind: 'write', path, upload, written: Promise.resolve(), mode };
      h.written = writeGuestFile(ctx, orgId, machine, path, upload, mode);
      h.written.catch((err: Error) => upload.abort(err));
      // The write has checked the path and opened its file once it asks for bytes.
      await Promise.race([upload.started, h.written]);
      if (ended) return upload.abort(new Error('the channel closed'));
      sftp.handle(reqId, handleOf(h));
    }),
  );

  sftp.on('WRITE', (reqId: number, handle: Buffer, offset: number, data: Buffer) =>
    serve(reqId, async () => {
      const h = lookup(handle);
      if (h.kind !== 'write')
        throw new Refused(STATUS_CODE.FAILURE, 'bad-request', 'not open for writing');
      await h.upload.push(offset, data);
      ok(reqId);
    }),
  );

  sftp.on('READ', (reqId: number, handle: Buffer, offset: number, length: number) =>
    serve(reqId, async () => {
      const h = lookup(handle);
      if (h.kind !== 'read')
        throw new Refused(STATUS_CODE.FAILURE, 'bad-request', 'not open for reading');
      const buf = Buffer.allocUnsafe(Math.min(length, READ_MAX));
      const { bytesRead } = await h.file.read(buf, 0, buf.length, offset);
      if (ended) return;
      if (bytesRead === 0) return sftp.status(reqId, STATUS_CODE.EOF);
      sftp.data(reqId, buf.subarray(0, bytesRead));
    }),
  );

  sftp.on('FSTAT', (reqId: number, handle: Buffer) =>
    serve(reqId, async ({ machine }) => {
      const h = lookup(handle);
      const st =
        h.kind === 'read'
          ? attrsOf(fileStat(await h.file.stat()))
          : h.kind === 'write'
            ? ({ mode: constants.S_IFREG | h.mode, size: h.upload.received } as Attributes)
            : attrsOf(await statGuestPath(ctx, orgId, machine, h.path, true));
      if (!ended) sftp.attrs(reqId, st);
    }),
  );

  // Of a file being written, only its size may be set, to where the writes end (scp's
  // truncation after writing in place); the mode it is written with may be repeated.
  sftp.on('FSETSTAT', (reqId: number, handle: Buffer, attrs: Attributes) =>
    serve(reqId, async () => {
      const h = lookup(handle);
      const others = [attrs.uid, attrs.gid, attrs.atime, attrs.mtime];
      if (h.kind !== 'write' || others.some((v) => v !== undefined)) {
        throw unsupported('setting owners or times');
      }
      if (attrs.size !== undefined && attrs.size !== h.upload.received) {
        throw unsupported('setting a size other than where the writes end');
      }
      if (attrs.mode !== undefined && (attrs.mode & 0o7777) !== h.mode) {
        throw unsupported('changing the mode of a file being written');
      }
      ok(reqId);
    }),
  );
  sftp.on('SETSTAT', (reqId: number) =>
    serve(reqId, () => Promise.reject(unsupported('setting attributes by path'))),
  );

  sftp.on('CLOSE', (reqId: number, handle: Buffer) =>
    serve(reqId, async () => {
      const h = lookup(handle);
      handles.delete(handle.readUInt32BE());
      if (h.kind === 'read') await h.file.close();
      if (h.kind === 'write') {
        h.upload.end();
        await h.written;
        log.info(
          { id: c.login.id, path: h.path, size: h.upload.received },
          'ssh gateway: sftp wrote',
        );
      }
      ok(reqId);
    }),
  );

  sftp.on('OPENDIR', (reqId: number, path: string) =>
    serve(reqId, async ({ machine, cwd }) => {
      const p = absolute(cwd, path);
      const entries = await listGuestStats(ctx, orgId, machine, p);
      if (!ended) sftp.handle(reqId, handleOf({ kind: 'dir', path: p, entries, next: 0 }));
    }),
  );

  sftp.on('READDIR', (reqId: number, handle: Buffer) =>
    serve(reqId, async () => {
      const h = lookup(handle);
      if (h.kind !== 'dir')
        throw new Refused(STATUS_CODE.FAILURE, 'bad-request', 'not a directory');
      const batch = h.entries.slice(h.next, h.next + NAMES_PER_ANSWER);
      h.next += batch.length;
      if (batch.length === 0) return void sftp.status(reqId, STATUS_CODE.EOF);
      const now = new Date();
      sftp.name(
        reqId,
        batch.map((e) => ({
          filename: e.name,
          longname: longname(e.name, e.stat, now),
          attrs: attrsOf(e.stat),
        })),
      );
    }),
  );

  const change =
    (what: string, fn: (machine: string, cwd: string) => Promise<string>) => (reqId: number) =>
      serve(reqId, async ({ machine, cwd }) => {
        const path = await fn(machine, cwd);
        log.info({ id: c.login.id, machine, path }, `ssh gateway: sftp ${what}`);
        ok(reqId);
      });
  sftp.on('MKDIR', (reqId: number, path: string, attrs: Attributes) =>
    change('mkdir', async (machine, cwd) => {
      const p = absolute(cwd, path);
      const mode = typeof attrs.mode === 'number' ? attrs.mode & 0o7777 : 0o777;
      await makeGuestDir(ctx, orgId, machine, p, mode & ~UMASK);
      return p;
    })(reqId),
  );
  sftp.on('REMOVE', (reqId: number, path: string) =>
    change('remove', async (machine, cwd) => {
      const p = absolute(cwd, path);
      await removeGuestPath(ctx, orgId, machine, p, false);
      return p;
    })(reqId),
  );
  sftp.on('RMDIR', (reqId: number, path: string) =>
    change('rmdir', async (machine, cwd) => {
      const p = absolute(cwd, path);
      await removeGuestPath(ctx, orgId, machine, p, true);
      return p;
    })(reqId),
  );
  sftp.on('RENAME', (reqId: number, from: string, to: string) =>
    change('rename', async (machine, cwd) => {
      const [a, b] = [absolute(cwd, from), absolute(cwd, to)];
      await renameGuestPath(ctx, orgId, machine, a, b);
      return `${a} -> ${b}`;
    })(reqId),
  );
  sftp.on('READLINK', (reqId: number) =>
    serve(reqId, () => Promise.reject(unsupported('reading a symlink'))),
  );
  sftp.on('SYMLINK', (reqId: number) =>
    serve(reqId, () => Promise.reject(unsupported('making a symlink'))),
  );

  // The client's end of input is its goodbye: the channel exits with 0, as sshd's does
  // when sftp-server exits (scp fails without it). Any other end gives no status.
  sftp.on('end', () => {
    if (!ended) exitStatus(sftp, 0);
    end();
  });
  sftp.on('close', end);
  return end;
}

/**
 * Sends the channel's exit status. ssh2's SFTP server has no `exit()` (its Channel has,
 * and does just this): the session channel's id and the protocol are the SFTP object's.
 */
function exitStatus(sftp: SFTPWrapper, code: number): void {
  const s = sftp as unknown as {
    _protocol?: { exitStatus(id: number, status: number): void };
    outgoing?: { id: number; state: string };
  };
  if (s.outgoing?.state === 'open') s._protocol?.exitStatus(s.outgoing.id, code);
}

/** The status and message a failure is answered with: pier's code, then its words. */
function statusOf(err: unknown): { status: number; message: string } {
  if (err instanceof Refused) return { status: err.status, message: `${err.code}: ${err.message}` };
  if (err instanceof UploadRefused) {
    return { status: STATUS_CODE.FAILURE, message: `${err.code}: ${err.message}` };
  }
  if (err instanceof BadPath)
    return { status: STATUS_CODE.FAILURE, message: `bad-request: ${err.message}` };
  if (err instanceof ApiError) {
    const status =
      err.code === 'not-found'
        ? STATUS_CODE.NO_SUCH_FILE
        : err.code === 'forbidden' || err.code === 'file-permission-denied'
          ? STATUS_CODE.PERMISSION_DENIED
          : STATUS_CODE.FAILURE;
    return { status, message: `${err.code}: ${err.message}` };
  }
  return { status: STATUS_CODE.FAILURE, message: 'host-error: the request failed on our side' };
}
