/**
 * How a build's RUN steps ran into the caps of its cgroup, read from the kernel's
 * counters of the build's group (pier's caps sit there, over all its RUN containers, which
 * runc puts in groups below it), so a failed build can say which cap cut it and a fork
 * bomb can be told from a step that forked a little:
 *
 * - processes killed for memory: `oom_kill` of memory.events (v2, counted up the tree);
 * - the memory cap reached: `max` of memory.events (v2), memory.failcnt (v1: a kill at
 *   the cap is counted in the RUN container's own group, gone with it when the step ends);
 * - forks refused at the process cap: `max` of pids.events, summed over the groups below
 *   (v1 counts them where the fork failed, in the RUN container's group, while it runs).
 */
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';

export interface CapEvents {
  /** Processes the kernel killed at the memory cap (v2). */
  oomKills: number;
  /** Times the group's memory reached its cap (it may have been reclaimed). */
  memoryAtCap: number;
  /** Forks refused at the process cap. */
  forkRefusals: number;
}

/** `key N` of a kernel counters file, or 0. */
async function counter(file: string, key: string): Promise<number> {
  const text = await readFile(file, 'utf8').catch(() => '');
  const m = new RegExp(`^${key} (\\d+)$`, 'm').exec(text);
  return m ? Number(m[1]) : 0;
}

/** `dir` and every group below it. */
async function tree(dir: string): Promise<string[]> {
  const out = [dir];
  for (const e of await readdir(dir, { withFileTypes: true }).catch(() => [])) {
    if (e.isDirectory()) out.push(...(await tree(path.join(dir, e.name))));
  }
  return out;
}

/** The counters of a group (its directories: one per hierarchy on v1). */
export async function capEvents(dirs: string[]): Promise<CapEvents> {
  const events: CapEvents = { oomKills: 0, memoryAtCap: 0, forkRefusals: 0 };
  for (const dir of dirs) {
    events.oomKills += await counter(path.join(dir, 'memory.events'), 'oom_kill');
    events.memoryAtCap += await counter(path.join(dir, 'memory.events'), 'max');
    const failcnt = await readFile(path.join(dir, 'memory.failcnt'), 'utf8').catch(() => '0');
    events.memoryAtCap += Number(failcnt.trim()) || 0;
    for (const d of await tree(dir)) {
      events.forkRefusals += await counter(path.join(d, 'pids.events'), 'max');
    }
  }
  return events;
}
