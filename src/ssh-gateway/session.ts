/**
 * A session channel of the SSH gateway: a shell or a command in a machine of the login's
 * app, as the exec route opens one (services/machines/exec-sessions.ts: the same checks,
 * per-machine cap, start rate, audit row, and the same process: `runc exec` as the
 * machine's user, under its seccomp profile and cgroup).
 *
 * `pty-req` gives it a terminal of the client's size (`window-change` resizes it); `exec`
 * runs its command line with `/bin/sh -c`, as sshd runs it with the user's shell; `shell`
 * runs `/bin/sh`. The exit status (or signal) goes back to the client. A session that
 * cannot open says why on stderr, `pier: <code>: <message>` with the code of spec 7.6
 * (`too-many-sessions`, `machine-stopped`, …), and exits with 255, as ssh does when it
 * cannot run a command. The `sftp` subsystem serves the machine's files instead (sftp.ts).
 */
import type { AcceptConnection, RejectConnection, ServerChannel, Session } from 'ssh2';
import { ApiError } from '../errors/api-error.js';
import type { GuestSession } from '../runtime/runtime.js';
import type { AuthEnded } from '../services/authenticator.js';
import {
  admitExecSession,
  endExecSession,
  startExecSession,
  type AdmittedSession,
} from '../services/machines/exec-sessions.js';
import { shellMachine } from '../services/ssh-logins.js';
import { serveGitChannel } from './git.js';
import type { LoggedIn } from './logged-in.js';
import { serveSftp } from './sftp.js';

/** Exit status of a session that never ran its command (ssh's own, for its failures). */
export const REFUSED_EXIT = 255;

/** A terminal's size as clients report it, kept within what a terminal can be. */
const dimension = (n: number, fallback: number) =>
  Number.isInteger(n) && n > 0 ? Math.min(n, 1000) : fallback;

export function serveSession(
  c: LoggedIn,
  accept: AcceptConnection<Session>,
  reject: RejectConnection,
): void {
  let done = false;
  let exited = false;
  let admitted: AdmittedSession | undefined;
  let channel: ServerChannel | undefined;
  let live: GuestSession | undefined;
  let pty: { cols: number; rows: number } | undefined;
  let endReason = 'client-closed';
  /** Ends a push of a `git` login's channel. */
  const pushing = new AbortController();
  /** Ends the channel's SFTP subsystem, when it is one. */
  let endSftp: (() => void) | undefined;

  /** Ends the session once: its process is killed unless it exited, its row says why. */
  const finish = (reason: string, why?: AuthEnded) => {
    if (done) return;
    done = true;
    endReason = reason;
    pushing.abort();
    endSftp?.();
    release?.();
    if (admitted && !exited) endExecSession(c.deps.ctx, admitted.id, reason);
    if (why && channel?.writable) {
      channel.stderr.write(`\r\npier: ${why.code}: ${why.message} (${why.reason})\r\n`);
      channel.close();
    }
  };
  const release = c.hold(finish);
  if (!release) return reject();
  const session = accept();
  session.on('close', () => finish('client-closed'));

  session.on('pty', (ok, no, info) => {
    if (channel) return no?.();
    pty = { cols: dimension(info.cols, 80), rows: dimension(info.rows, 24) };
    ok?.();
  });
  session.on('window-change', (ok, _no, info) => {
    if (pty) {
      pty = { cols: dimension(info.cols, pty.cols), rows: dimension(info.rows, pty.rows) };
      live?.resize(pty.cols, pty.rows);
    }
    ok?.();
  });
  // Variables from the client's side are not passed in: the machine's environment holds.
  session.on('env', (_ok, no) => no?.());
  // One process per session channel: a second request finds no channel to accept.
  const start = (ch: ServerChannel | undefined, argv: string[] | undefined) => {
    if (!ch) return;
    // A write racing the channel's close must not become an unhandled error.
    ch.on('error', () => undefined);
    ch.stderr.on('error', () => undefined);
    run(ch, argv).catch((err: unknown) => refuse(ch, err));
  };
  session.on('shell', (ok) => (c.login.git ? startGit(ok(), undefined) : start(ok(), undefined)));
  session.on('exec', (ok, _no, info) =>
    c.login.git ? startGit(ok(), info.command) : start(ok(), ['/bin/sh', '-c', info.command]),
  );
  // `sftp`, and `scp` (OpenSSH 9's speaks SFTP): the machine's files (sftp.ts). A `git`
  // login reaches no machine; `scp -O`'s legacy protocol is a command (`scp -t`), run as any.
  session.on('sftp', (ok, no) => {
    if (c.login.git || channel || endSftp) return no?.();
    const sftp = ok();
    if (sftp) endSftp = serveSftp(c, sftp);
  });
  // A `git` login's channel carries a push (git.ts), not a process in a machine.
  const startGit = (ch: ServerChannel | undefined, command: string | undefined) => {
    if (!ch || channel) return;
    channel = ch;
    ch.on('error', () => undefined);
    ch.stderr.on('error', () => undefined);
    void serveGitChannel(c, ch, command, pushing.signal).then((code) => {
      if (!done && ch.writable) {
        ch.exit(code);
        ch.end();
      }
      finish('exited');
    });
  };

  /** Tells the client why the session cannot open (or failed), and closes it. */
  const refuse = (ch: ServerChannel, err: unknown) => {
    const e = err instanceof ApiError ? err : new ApiError('host-error');
    if (!(err instanceof ApiError)) c.deps.log.error({ err }, 'ssh gateway: session failed');
    if (done || !ch.writable) return finish(e.code);
    ch.stderr.write(`pier: ${e.code}: ${e.message}\r\n`);
    ch.exit(REFUSED_EXIT);
    ch.end();
    finish(e.code);
  };

  async function run(ch: ServerChannel, argv: string[] | undefined): Promise<void> {
    channel = ch;
    const ctx = c.deps.ctx;
    const tty = pty !== undefined;
    try {
      const machineId = await shellMachine(ctx, c.login);
      const org = await c.deps.authenticator.org(c.login.orgId);
      if (org?.suspended) throw new ApiError('org-suspended');
      admitted = await admitExecSession(
        ctx,
        c.deps.rateLimiter,
        { orgId: c.login.orgId, keyId: c.login.id, agent: false, ip: c.ip },
        machineId,
        { argv, tty, cols: pty?.cols ?? 80, rows: pty?.rows ?? 24 },
      );
    } catch (err) {
      return refuse(ch, err);
    }
    // The client left, or the login ended, while the session was admitted.
    if (done) return endExecSession(ctx, admitted.id, endReason);
    let guest: GuestSession;
    try {
      guest = await startExecSession(ctx, admitted);
    } catch (err) {
      return refuse(ch, err); // its row is closed already
    }
    if (done) return endExecSession(ctx, admitted.id, endReason);
    live = guest;
    guest.onData((stream, data) => {
      if (done || !ch.writable) return;
      if (stream === 'stdout') ch.write(data);
      else ch.stderr.write(data);
    });
    guest.onExit((code, signal) => {
      exited = true;
      if (done) return;
      if (code !== null) ch.exit(code);
      else ch.exit((signal ?? 'SIGKILL').replace(/^SIG/, ''), false, '');
      ch.end();
      finish('exited');
    });
    // Input the client sent while the process started waited in the channel until now.
    ch.on('data', (data: Buffer) => guest.write(data));
    // End of input closes the process's stdin; on a terminal, ^D is the client's to send.
    ch.on('end', () => {
      if (!tty) guest.end();
    });
  }
}
