/**
 * Where the raw-disk baselines of the object benchmarks write: a temp dir next to pier's
 * data dir, checked to be on the same filesystem (same device), so that both sides of a
 * comparison write to the same disk through the same filesystem.
 */
import { mkdtemp, stat, statfs } from 'node:fs/promises';
import path from 'node:path';

/** Most bytes one measured phase may write, whatever the free space. */
const MAX_PHASE_BYTES = 16 * 1024 ** 3;
/** Share of the free space one phase may use (one side's data is on disk at a time). */
const FREE_SHARE = 0.4;

/** A new temp dir beside `dataDir`; fails unless it is on the same filesystem. */
export async function diskDirBeside(dataDir: string, prefix: string): Promise<string> {
  const dir = await mkdtemp(path.join(path.dirname(dataDir), `${prefix}-`));
  const [a, b] = await Promise.all([stat(dir), stat(dataDir)]);
  if (a.dev !== b.dev) {
    throw new Error(`${dir} and pier's data dir ${dataDir} are on different filesystems`);
  }
  return dir;
}

/** How many bytes a phase may write in `dir`: a share of the free space, at most 16 GiB. */
export async function phaseBudget(dir: string): Promise<number> {
  const fs = await statfs(dir);
  return Math.min(MAX_PHASE_BYTES, Math.floor(fs.bavail * fs.bsize * FREE_SHARE));
}
