/**
 * Finding out which process is a data directory's postmaster, through /proc. The pid in
 * postmaster.pid is only a claim: the process may be gone and its pid reused, or the file
 * may have been copied with the directory (a btrfs snapshot of a running server). A pid
 * counts only when that process is alive and its working directory is this data directory
 * (the postmaster and all its children chdir there at start).
 */
import { readdir, readFile, readlink, realpath } from 'node:fs/promises';
import { readText } from './files.js';
import path from 'node:path';

/** What postmaster.pid says (lines: pid, datadir, start, port, socket dir, listen, shm, status). */
export interface PidFile {
  pid: number;
  port: number;
  /** 'starting', 'stopping', 'ready' or 'standby' (PostgreSQL 10+). */
  status: string;
}

/** The parsed postmaster.pid of `pgdata`, or undefined when there is none (or it is half written). */
export async function readPidFile(pgdata: string): Promise<PidFile | undefined> {
  const text = await readText(path.join(pgdata, 'postmaster.pid')).catch(() => undefined);
  if (!text) return undefined;
  const lines = text.split('\n');
  const pid = Number(lines[0]);
  if (!Number.isInteger(pid) || pid <= 0) return undefined;
  return { pid, port: Number(lines[3]), status: (lines[7] ?? '').trim() };
}

/** The canonical path of `dir` (what /proc/<pid>/cwd shows), or undefined when it is gone. */
export async function canonical(dir: string): Promise<string | undefined> {
  return realpath(dir).catch(() => undefined);
}

/** Whether `pid` is a live (not zombie) process. */
export async function isAlive(pid: number): Promise<boolean> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => undefined);
  if (!stat) return false;
  // "pid (comm) state ...": comm may hold spaces and parentheses, so cut at the last ')'.
  const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
  return state !== 'Z' && state !== 'X';
}

/** Whether `pid` is alive and works in `dir` (a canonical path). */
export async function worksIn(pid: number, dir: string): Promise<boolean> {
  const cwd = await readlink(`/proc/${pid}/cwd`).catch(() => undefined);
  return cwd === dir && (await isAlive(pid));
}

/** The pid of the running postmaster of `pgdata`, or undefined. */
export async function livePostmaster(pgdata: string): Promise<number | undefined> {
  const file = await readPidFile(pgdata);
  if (!file) return undefined;
  const dir = await canonical(pgdata);
  if (!dir) return undefined;
  return (await worksIn(file.pid, dir)) ? file.pid : undefined;
}

/**
 * Every live process working in `pgdata`: after a postmaster was killed, its backends
 * linger until they notice, still attached to the old shared memory.
 */
export async function processesIn(pgdata: string): Promise<number[]> {
  const dir = await canonical(pgdata);
  if (!dir) return [];
  const found: number[] = [];
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const pid = Number(entry);
    if (pid === process.pid) continue;
    if (await worksIn(pid, dir)) found.push(pid);
  }
  return found;
}
