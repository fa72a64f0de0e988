/**
 * The server process: spawned detached in its own session as the service user (so it
 * outlives pier), found again through its pidfile, and told apart from an unrelated
 * process that got a recycled pid by what /proc says of it.
 */
import { spawn } from 'node:child_process';
import { closeSync, constants, openSync } from 'node:fs';
import { open, readFile, readlink, rm, type FileHandle } from 'node:fs/promises';
import type { ServiceUser } from '../../host/service-user.js';
import type { RedisBinaries } from './binaries.js';
import { writeAtomic } from './files.js';
import type { RedisPaths } from './paths.js';

/** Resolves after `ms` milliseconds. */
export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Whether `pid` is a live (not zombie) process. */
export async function isAlive(pid: number): Promise<boolean> {
  try {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
    // The state follows the command name, which is in parentheses and may hold spaces.
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    return state !== 'Z' && state !== 'X';
  } catch {
    return false;
  }
}

/**
 * Whether `pid` is the server of the instance at `paths`: a live redis-server whose
 * working directory is this instance's data directory (Redis chdirs to `dir`). A copied
 * pidfile (a snapshot of another instance) or a recycled pid fails this.
 */
export async function isServerOf(
  pid: number,
  paths: RedisPaths,
  bins: RedisBinaries,
): Promise<boolean> {
  if (!(await isAlive(pid))) return false;
  try {
    const [exe, cwd] = await Promise.all([
      readlink(`/proc/${pid}/exe`),
      readlink(`/proc/${pid}/cwd`),
    ]);
    return exe === bins.serverReal && cwd === paths.dataDir;
  } catch {
    return false; // it exited meanwhile, or it is not ours to look at
  }
}

/** The pid of the running server of `paths`, or undefined. */
export async function runningPid(
  paths: RedisPaths,
  bins: RedisBinaries,
): Promise<number | undefined> {
  const text = await readFile(paths.pidFile, 'utf8').catch(() => '');
  const pid = Number.parseInt(text.trim(), 10);
  if (!Number.isSafeInteger(pid) || pid <= 1) return undefined;
  return (await isServerOf(pid, paths, bins)) ? pid : undefined;
}

/** Waits up to `ms` for `pid` to end; true when it did. */
export async function waitExit(pid: number, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (await isAlive(pid)) {
    if (Date.now() >= deadline) return false;
    await sleep(10);
  }
  return true;
}

/** Sends `signal` to `pid`, ignoring a process that is already gone. */
export function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
  }
}

/**
 * Starts `redis-server <conf> [extra...]` detached, in its own session, as `user`, with
 * stdout and stderr appended to the log file. pier writes the pidfile itself (the config
 * names none: its directory is root's), at once, so a pier that dies right after still
 * finds the server.
 */
export async function spawnServer(
  paths: RedisPaths,
  bins: RedisBinaries,
  user: ServiceUser,
  extraArgs: string[] = [],
): Promise<number> {
  const asRoot = process.getuid?.() === 0;
  const flags = constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT | constants.O_NOFOLLOW;
  const log = openSync(paths.logFile, flags, 0o600);
  let pid: number | undefined;
  try {
    const child = spawn(bins.server, [paths.conf, ...extraArgs], {
      cwd: paths.dataDir,
      detached: true,
      stdio: ['ignore', log, log],
      env: { PATH: '/usr/bin:/bin', LANG: 'C' },
      ...(asRoot ? { uid: user.uid, gid: user.gid } : {}),
    });
    await new Promise<void>((resolve, reject) => {
      child.once('spawn', resolve);
      child.once('error', reject);
    });
    child.unref();
    pid = child.pid;
  } finally {
    closeSync(log);
  }
  if (pid === undefined) throw new Error('redis-server started without a pid');
  await writeAtomic(paths.pidFile, `${pid}\n`, 0o644);
  return pid;
}

/** Removes a pidfile left by a server that is gone (Redis removes it on a clean exit). */
export async function removePidFile(paths: RedisPaths): Promise<void> {
  await rm(paths.pidFile, { force: true });
}

/** The last `lines` lines of the server's log (from its last 8 KiB), for error messages. */
export async function logTail(paths: RedisPaths, lines = 15): Promise<string> {
  let handle: FileHandle | undefined;
  try {
    handle = await open(paths.logFile, 'r');
    const size = (await handle.stat()).size;
    const length = Math.min(size, 8192);
    const buf = Buffer.alloc(length);
    await handle.read(buf, 0, length, size - length);
    return buf.toString('utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '';
  } finally {
    await handle?.close();
  }
}
