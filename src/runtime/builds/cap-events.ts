/**
 * How often a build's RUN steps ran into the caps of its cgroup, read from the kernel's
 * counters of the build's group (pier's caps sit there, over all its RUN containers):
 * processes killed for memory (`oom_kill` of memory.events on v2, memory.oom_control on
 * v1) and forks refused at the process cap (`max` of pids.events). So a failed build can
 * say which cap cut it, and a fork bomb can be told from a step that forked a little.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';

export interface CapEvents {
  /** Processes the kernel killed at the memory cap. */
  oomKills: number;
  /** Forks refused at the process cap. */
  forkRefusals: number;
}

/** `key N` of a kernel counters file, or 0. */
async function counter(file: string, key: string): Promise<number> {
  const text = await readFile(file, 'utf8').catch(() => '');
  const m = new RegExp(`^${key} (\\d+)$`, 'm').exec(text);
  return m ? Number(m[1]) : 0;
}

/** The counters of a group, summed over its directories (one per hierarchy on v1). */
export async function capEvents(dirs: string[]): Promise<CapEvents> {
  let oomKills = 0;
  let forkRefusals = 0;
  for (const dir of dirs) {
    oomKills += await counter(path.join(dir, 'memory.events'), 'oom_kill');
    oomKills += await counter(path.join(dir, 'memory.oom_control'), 'oom_kill');
    forkRefusals += await counter(path.join(dir, 'pids.events'), 'max');
  }
  return { oomKills, forkRefusals };
}
