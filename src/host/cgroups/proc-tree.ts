/**
 * The process tree under a pid, read from /proc/<pid>/stat. PostgreSQL forks its helpers
 * (checkpointer, walwriter…) before pier can move the postmaster into a cgroup, so
 * adopting a server means finding the children it already has.
 */
import { readdir, readFile } from 'node:fs/promises';

/**
 * The parent pid in a /proc/<pid>/stat line: `pid (comm) state ppid …`. The command name
 * may hold spaces and parentheses, so fields are counted after its last `)`.
 */
export function parsePpid(stat: string): number | undefined {
  const close = stat.lastIndexOf(')');
  if (close < 0) return undefined;
  const ppid = Number(stat.slice(close + 2).split(' ')[1]);
  return Number.isInteger(ppid) ? ppid : undefined;
}

/** Parent of every process now visible in `procDir`; processes that exit meanwhile are skipped. */
async function parents(procDir: string): Promise<Map<number, number>> {
  const pids = (await readdir(procDir)).filter((e) => /^\d+$/.test(e));
  const map = new Map<number, number>();
  await Promise.all(
    pids.map(async (pid) => {
      const stat = await readFile(`${procDir}/${pid}/stat`, 'utf8').catch(() => undefined);
      const ppid = stat === undefined ? undefined : parsePpid(stat);
      if (ppid !== undefined) map.set(Number(pid), ppid);
    }),
  );
  return map;
}

/**
 * Pids of all current descendants of `root` (children, grandchildren…; not `root`
 * itself), parents before their children. A snapshot: processes may fork or exit as it
 * is taken, which is why callers scan again until nothing new turns up.
 */
export async function descendants(root: number, procDir = '/proc'): Promise<number[]> {
  const children = new Map<number, number[]>();
  for (const [pid, ppid] of await parents(procDir)) {
    const list = children.get(ppid);
    if (list) list.push(pid);
    else children.set(ppid, [pid]);
  }
  const out: number[] = [];
  const queue = [root];
  const seen = new Set(queue);
  for (let pid = queue.shift(); pid !== undefined; pid = queue.shift()) {
    for (const child of children.get(pid) ?? []) {
      if (seen.has(child)) continue; // pid reuse mid-scan could make a cycle
      seen.add(child);
      out.push(child);
      queue.push(child);
    }
  }
  return out;
}
