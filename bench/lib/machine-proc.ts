/**
 * What /proc says of the memory and CPU of processes, for `machines-many`: RSS (what `ps`
 * and `top` show; shared pages counted in every process that maps them), the peak RSS,
 * and PSS (shared pages split between the processes sharing them: the sum over processes
 * is what they take together), in MiB.
 */
import { readdir, readFile } from 'node:fs/promises';

export interface Memory {
  rssMiB: number;
  /** Peak RSS of the process's life (VmHWM). */
  hwmMiB: number;
  pssMiB: number;
  /** Of the RSS: anonymous pages (heaps, V8's and malloc's) and file pages (code). */
  anonMiB: number;
  fileMiB: number;
}

const kib = (text: string, field: string): number => {
  const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(text);
  return m ? Number(m[1]) : 0;
};

/** The memory of `pid`, or undefined when it is gone. */
export async function memoryOf(pid: number): Promise<Memory | undefined> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
  if (!status) return undefined;
  const rollup = await readFile(`/proc/${pid}/smaps_rollup`, 'utf8').catch(() => '');
  return {
    rssMiB: kib(status, 'VmRSS') / 1024,
    hwmMiB: kib(status, 'VmHWM') / 1024,
    pssMiB: kib(rollup, 'Pss') / 1024,
    anonMiB: kib(status, 'RssAnon') / 1024,
    fileMiB: kib(status, 'RssFile') / 1024,
  };
}

/** Sum and mean of the memory of `pids` (those still alive). */
export async function memoryOfAll(
  pids: number[],
): Promise<{ count: number; rssMiB: number; pssMiB: number; meanRssMiB: number }> {
  let count = 0;
  let rss = 0;
  let pss = 0;
  for (const pid of pids) {
    const m = await memoryOf(pid);
    if (!m) continue;
    count++;
    rss += m.rssMiB;
    pss += m.pssMiB;
  }
  return { count, rssMiB: rss, pssMiB: pss, meanRssMiB: count ? rss / count : 0 };
}

/** Fields of /proc/<pid>/stat after the command name; [] when the process is gone. */
async function statFields(pid: number): Promise<string[]> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
  return stat ? stat.slice(stat.lastIndexOf(')') + 2).split(' ') : [];
}

/** CPU time `pid` has used (user + system), in seconds. */
export async function cpuSeconds(pid: number): Promise<number> {
  const f = await statFields(pid);
  // utime and stime are fields 14 and 15 (f[11], f[12]), in clock ticks (100/s).
  return f.length ? (Number(f[11]) + Number(f[12])) / 100 : 0;
}

/**
 * CPU time of the children `pid` has waited for (cutime + cstime): the tools it ran
 * (ip, btrfs, mount...) once they have exited, in seconds.
 */
export async function childCpuSeconds(pid: number): Promise<number> {
  const f = await statFields(pid);
  return f.length ? (Number(f[13]) + Number(f[14])) / 100 : 0;
}

/** CPU time the whole host has been busy (all CPUs: not idle, not iowait), in seconds. */
export async function hostBusySeconds(): Promise<number> {
  const line = (await readFile('/proc/stat', 'utf8')).split('\n')[0]!;
  const t = line.trim().split(/\s+/).slice(1).map(Number);
  const total = t.slice(0, 8).reduce((a, b) => a + b, 0);
  return (total - t[3]! - t[4]!) / 100;
}

/**
 * CPU seconds used so far by each process named `comm` whose command line contains
 * `needle` (PostgreSQL backends show their database there).
 */
export async function cpuByCmdline(comm: string, needle: string): Promise<Map<number, number>> {
  const out = new Map<number, number>();
  for (const e of await readdir('/proc')) {
    if (!/^\d+$/.test(e)) continue;
    const name = (await readFile(`/proc/${e}/comm`, 'utf8').catch(() => '')).trim();
    if (name !== comm) continue;
    const cmd = await readFile(`/proc/${e}/cmdline`, 'utf8').catch(() => '');
    if (cmd.includes(needle)) out.set(Number(e), await cpuSeconds(Number(e)));
  }
  return out;
}

/** CPU used between two `cpuByCmdline` snapshots (processes that ended in between are lost). */
export function cpuDelta(before: Map<number, number>, after: Map<number, number>): number {
  let sum = 0;
  for (const [pid, s] of after) sum += s - (before.get(pid) ?? 0);
  return sum;
}

/** The number of processes on the host now. */
export async function processCount(): Promise<number> {
  return (await readdir('/proc')).filter((e) => /^\d+$/.test(e)).length;
}

/**
 * CPU used since `start()` by processes named `comm` whose command line contains `needle`,
 * sampled now and then (`sample()`), so that a process which ends between two samples is
 * counted up to its last sample rather than lost.
 */
export class CpuTally {
  private readonly seen = new Map<number, { first: number; last: number }>();

  constructor(
    private readonly comm: string,
    private readonly needle: string,
  ) {}

  async sample(): Promise<void> {
    for (const [pid, s] of await cpuByCmdline(this.comm, this.needle)) {
      const entry = this.seen.get(pid);
      if (entry) entry.last = s;
      else this.seen.set(pid, { first: s, last: s });
    }
  }

  /** Seconds used between the first and the last sample of each process. */
  seconds(): number {
    let sum = 0;
    for (const e of this.seen.values()) sum += e.last - e.first;
    return sum;
  }
}
