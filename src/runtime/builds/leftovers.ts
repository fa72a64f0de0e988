/**
 * What an earlier try of a build may have left when `pier serve` died in the middle of
 * it (kill -9, a host crash): buildah runs in a process group of its own and outlives
 * pier, the RUN step's container runs on in the build's cgroup after buildah is gone,
 * and buildah's working containers stay recorded in the app's layer storage.
 *
 * A build marks the app's storage until it ends well. When the next build (a rerun, or
 * the app's next one) finds the mark, the builder kills every process that names this
 * app's storage (buildah of any earlier build of the app: builds of one app run
 * one at a time in this process, and one `pier serve` holds a data dir) or this build's
 * runc state, and the build's cgroup is emptied by the caller. Working containers are
 * then removed with `buildah rm --all` (none of them belongs to a build still running).
 */
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';

/** Processes whose command line contains one of `needles` (never this process). */
export async function processesNaming(needles: string[]): Promise<number[]> {
  const pids: number[] = [];
  for (const entry of await readdir('/proc').catch(() => [] as string[])) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    const argv = await readFile(path.join('/proc', entry, 'cmdline'), 'utf8').catch(() => '');
    if (needles.some((n) => argv.includes(n))) pids.push(Number(entry));
  }
  return pids;
}

/** SIGKILLs every process naming one of `needles`, and waits (briefly) until they are gone. */
export async function killProcessesNaming(needles: string[]): Promise<number[]> {
  const killed = await processesNaming(needles);
  for (const pid of killed) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone already
    }
  }
  for (let i = 0; i < 50 && (await processesNaming(needles)).length > 0; i++) {
    await new Promise((r) => setTimeout(r, 100));
  }
  return killed;
}
