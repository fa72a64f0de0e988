/**
 * Starting and stopping a postmaster. It is spawned directly (no pg_ctl, no shell) in its
 * own session with its output in the volume's log, so it outlives pier; readiness is read
 * from postmaster.pid every 10 ms, which is what pg_ctl -w does at a tenth of the pace.
 */
import { spawn } from 'node:child_process';
import { constants } from 'node:fs';
import { lstat, open, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { EngineEnv } from '../engine.js';
import type { PgBinaries } from './binaries.js';
import { CHILD_ENV, failure } from './exec.js';
import { openAppend } from './files.js';
import type { Layout } from './layout.js';
import {
  canonical,
  isAlive,
  livePostmaster,
  processesIn,
  readPidFile,
  worksIn,
} from './postmaster.js';

const STEP_MS = 10;
/** The log is set aside at a start once it grows past this. */
const LOG_ROTATE_BYTES = 16 * 1024 * 1024;

/**
 * The postmaster.pid status of a server that accepts connections: read-write on a
 * primary, read-only on a hot standby. ('standby' there means up but refusing
 * connections, which is what a restore replaying with hot_standby off shows until it is
 * promoted; so waiting for 'ready' there waits for the promotion.)
 */
const READY = 'ready';

/** Options of {@link launch}. */
export interface LaunchOptions {
  /** How long crash recovery or replay may take before we give up waiting; default 10 min. */
  timeoutMs?: number;
}

/**
 * Starts the server of `layout` unless it runs, and resolves with the postmaster's pid
 * once it accepts connections. A failed start throws with the tail of the log.
 */
export async function launch(
  env: EngineEnv,
  bins: PgBinaries,
  layout: Layout,
  opts: LaunchOptions = {},
): Promise<number> {
  const deadline = Date.now() + (opts.timeoutMs ?? 10 * 60_000);
  const running = await livePostmaster(layout.pgdata);
  if (running) return waitReady(layout, running, deadline, () => undefined, 0);

  await clearStaleLock(layout.pgdata);
  await rotateLog(layout.logFile);
  const log = await openAppend(env.user, layout.logFile);
  let offset: number;
  let exit: string | undefined;
  let child;
  try {
    offset = (await log.stat()).size;
    child = spawn(path.join(bins.dir, 'postgres'), ['-D', layout.pgdata], {
      detached: true,
      stdio: ['ignore', log.fd, log.fd],
      uid: env.user.uid,
      gid: env.user.gid,
      cwd: '/',
      env: CHILD_ENV,
    });
  } finally {
    await log.close();
  }
  child.on('error', (err) => (exit = err.message));
  child.on('exit', (code, signal) => (exit = signal ? `killed by ${signal}` : `exit ${code}`));
  child.unref();
  const pid = child.pid;
  if (pid === undefined) {
    await sleep(STEP_MS);
    throw failure('PostgreSQL could not be started', exit ?? 'spawn failed');
  }
  return waitReady(layout, pid, deadline, () => exit, offset);
}

async function waitReady(
  layout: Layout,
  pid: number,
  deadline: number,
  exited: () => string | undefined,
  logOffset: number,
): Promise<number> {
  for (;;) {
    const file = await readPidFile(layout.pgdata);
    if (file?.pid === pid && file.status === READY) return pid;
    const gone = exited() ?? ((await isAlive(pid)) ? undefined : 'exited');
    if (gone) {
      const tail = await logTail(layout.logFile, logOffset);
      throw failure(`PostgreSQL did not start (${gone})`, tail);
    }
    if (Date.now() > deadline) {
      const tail = await logTail(layout.logFile, logOffset);
      throw failure('PostgreSQL did not become ready in time', tail);
    }
    await sleep(STEP_MS);
  }
}

/**
 * A postmaster.pid whose pid is now some other live process would make PostgreSQL refuse
 * to start, so it goes; but only once no old backend works in the directory any more
 * (PostgreSQL's own shared-memory check needs the file to find them). A pid that is simply
 * dead is left for PostgreSQL, which handles that case itself.
 */
async function clearStaleLock(pgdata: string): Promise<void> {
  await reapOrphans(pgdata);
  const file = await readPidFile(pgdata);
  if (file && (await isAlive(file.pid))) {
    await rm(path.join(pgdata, 'postmaster.pid'), { force: true });
  }
}

/** Waits for processes left in `pgdata` by a killed postmaster to end; kills them after 5 s. */
export async function reapOrphans(pgdata: string, graceMs = 5_000): Promise<void> {
  const deadline = Date.now() + graceMs;
  for (;;) {
    const left = await processesIn(pgdata);
    if (left.length === 0) return;
    if (Date.now() > deadline) left.forEach((pid) => signal(pid, 'SIGKILL'));
    await sleep(STEP_MS * 5);
  }
}

/**
 * Stops the server of `pgdata` if it runs: SIGINT (fast: rolls back sessions, writes a
 * checkpoint) or SIGQUIT (immediate: crash recovery at the next start). Escalates to
 * SIGQUIT and then SIGKILL when the server does not end in time.
 */
export async function halt(
  pgdata: string,
  mode: 'fast' | 'immediate',
  timeoutMs = 60_000,
): Promise<void> {
  const pid = await livePostmaster(pgdata);
  if (pid) {
    const dir = (await canonical(pgdata)) ?? pgdata;
    const steps: [NodeJS.Signals, number][] =
      mode === 'fast'
        ? [
            ['SIGINT', timeoutMs],
            ['SIGQUIT', 10_000],
          ]
        : [['SIGQUIT', Math.min(timeoutMs, 15_000)]];
    let gone = false;
    for (const [sig, ms] of steps) {
      signal(pid, sig);
      if ((gone = await waitGone(pid, dir, ms))) break;
    }
    if (!gone) {
      for (const child of await processesIn(pgdata)) signal(child, 'SIGKILL');
      signal(pid, 'SIGKILL');
      await waitGone(pid, dir, 10_000);
    }
  }
  await reapOrphans(pgdata);
}

async function waitGone(pid: number, dir: string, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() <= deadline) {
    if (!(await worksIn(pid, dir))) return true;
    await sleep(STEP_MS);
  }
  return false;
}

function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
  }
}

/** Sets a big log aside (one old generation is kept), so it cannot grow without end. */
async function rotateLog(logFile: string): Promise<void> {
  const size = (await lstat(logFile).catch(() => undefined))?.size ?? 0;
  if (size > LOG_ROTATE_BYTES) await rename(logFile, `${logFile}.1`);
}

/** The last lines the server wrote since `offset` (what a failed start said). */
export async function logTail(logFile: string, offset = 0, maxBytes = 4_000): Promise<string> {
  const flags = constants.O_RDONLY | constants.O_NOFOLLOW;
  const handle = await open(logFile, flags).catch(() => undefined);
  if (!handle) return '';
  try {
    const size = (await handle.stat()).size;
    const from = Math.max(offset, size - maxBytes);
    const buf = Buffer.alloc(Math.max(0, size - from));
    await handle.read(buf, 0, buf.length, from);
    return buf.toString('utf8').trim();
  } finally {
    await handle.close();
  }
}
