/**
 * What /proc says of a process, for telling a sandbox's processes apart from whatever
 * later gets their recycled pids. A process is named by its pid and its start time (in
 * clock ticks since boot, field 22 of /proc/<pid>/stat): the pair never repeats while
 * the host runs, so a pidfile read after a restart cannot point pier at a stranger.
 */
import { readdir, readFile } from 'node:fs/promises';

/** A process as recorded: its pid and its start time in clock ticks since boot. */
export interface ProcRef {
  pid: number;
  start: number;
}

/** The fields of /proc/<pid>/stat that follow the command name (which may hold spaces). */
function statFields(stat: string): string[] {
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
}

/** The process `pid` as a ProcRef, or undefined when it is gone or a zombie. */
export async function procRef(pid: number): Promise<ProcRef | undefined> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
  if (!stat) return undefined;
  const fields = statFields(stat);
  // fields[0] is the state (field 3); the start time is field 22, so fields[19].
  if (fields[0] === 'Z' || fields[0] === 'X') return undefined;
  const start = Number(fields[19]);
  return Number.isSafeInteger(start) ? { pid, start } : undefined;
}

/** Whether `ref` is still the same live (not zombie) process. */
export async function isRunning(ref: ProcRef | undefined): Promise<boolean> {
  if (!ref) return false;
  const now = await procRef(ref.pid);
  return now !== undefined && now.start === ref.start;
}

/** Pids of the direct children of `pid` (every thread's list), [] when it is gone. */
export async function childrenOf(pid: number): Promise<number[]> {
  // Each thread lists the children it forked: Go programs (runc) fork from any thread.
  const tasks = await readdir(`/proc/${pid}/task`).catch(() => [] as string[]);
  const lists = await Promise.all(
    tasks.map((t) => readFile(`/proc/${pid}/task/${t}/children`, 'utf8').catch(() => '')),
  );
  return lists
    .join(' ')
    .split(' ')
    .filter((s) => s.trim() !== '')
    .map(Number);
}

/**
 * The pid `pid` has in the innermost pid namespace it belongs to (the last `NSpid` entry
 * of /proc/<pid>/status), or undefined when it is gone.
 */
export async function innerPid(pid: number): Promise<number | undefined> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
  const line = status.split('\n').find((l) => l.startsWith('NSpid:'));
  const last = line?.trim().split(/\s+/).pop();
  return last === undefined ? undefined : Number(last);
}

/** Sends `signal` to `pid`; false when there is no such process. */
export function kill(pid: number, signal: NodeJS.Signals | number): boolean {
  try {
    process.kill(pid, signal);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ESRCH') return false;
    throw err;
  }
}

/**
 * CPU time `pid` has used, its reaped children's included (utime + stime + cutime +
 * cstime, fields 14–17 of /proc/<pid>/stat), in clock ticks (1/100 s on Linux); 0 when gone.
 */
export async function cpuTicks(pid: number): Promise<number> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
  if (!stat) return 0;
  const f = statFields(stat);
  return [11, 12, 13, 14].reduce((sum, i) => sum + (Number(f[i]) || 0), 0);
}

/** `pid` and every process under it, the deepest first. */
async function processTree(pid: number): Promise<number[]> {
  const out: number[] = [];
  for (const child of await childrenOf(pid)) out.push(...(await processTree(child)));
  out.push(pid);
  return out;
}

/** Sends `signal` (default SIGKILL) to `pid` and every process under it. */
export async function killTree(pid: number, signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
  for (const p of await processTree(pid)) kill(p, signal);
}

/** Resolves after `ms` milliseconds. */
export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
