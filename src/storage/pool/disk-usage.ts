/** Space figures read from the filesystem: statfs totals and a du-like walk. */
import { lstat, opendir, statfs } from 'node:fs/promises';
import path from 'node:path';

/** Total, used and free bytes of the filesystem holding `dir` (free: what non-root may use). */
export async function filesystemSpace(
  dir: string,
): Promise<{ totalBytes: number; usedBytes: number; freeBytes: number }> {
  const s = await statfs(dir);
  return {
    totalBytes: s.blocks * s.bsize,
    usedBytes: (s.blocks - s.bfree) * s.bsize,
    freeBytes: s.bavail * s.bsize,
  };
}

/**
 * Bytes allocated to everything under `dir`, like `du -s`: blocks rather than sizes (so
 * sparse files count what they hold), each hard-linked inode once, and without crossing
 * into other filesystems mounted inside.
 */
export async function diskUsage(dir: string): Promise<number> {
  const top = await lstat(dir);
  const seen = new Set<number>();
  let total = 0;
  const walk = async (p: string): Promise<void> => {
    const st = await lstat(p);
    if (st.dev !== top.dev) return;
    if (st.nlink > 1 && !st.isDirectory()) {
      if (seen.has(st.ino)) return;
      seen.add(st.ino);
    }
    total += st.blocks * 512;
    if (!st.isDirectory()) return;
    for await (const entry of await opendir(p)) {
      await walk(path.join(p, entry.name)).catch(ignoreVanished);
    }
  };
  await walk(dir);
  return total;
}

/** Files vanish while we count (a running database); what remains is still an answer. */
function ignoreVanished(err: unknown): void {
  if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
}
