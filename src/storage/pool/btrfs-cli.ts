/**
 * The btrfs commands the pool uses, and parsers for the little of their output it reads.
 * Each call is one `btrfs` process: they are rare (create, snapshot, delete, a quota
 * change), so the cost of a fork is nothing beside what they do.
 */
import { stat, statfs } from 'node:fs/promises';
import { runTool } from './run.js';

/** f_type of a btrfs filesystem in statfs(2). */
export const BTRFS_SUPER_MAGIC = 0x9123683e;

/** The root directory of every btrfs subvolume has this inode number. */
const SUBVOLUME_ROOT_INODE = 256;

/** Whether `dir` lives on a btrfs filesystem. */
export async function isOnBtrfs(dir: string): Promise<boolean> {
  return (await statfs(dir)).type === BTRFS_SUPER_MAGIC;
}

/** Whether `dir` is the top of a subvolume (and not just a directory inside one). */
export async function isSubvolume(dir: string): Promise<boolean> {
  const st = await stat(dir);
  return st.isDirectory() && st.ino === SUBVOLUME_ROOT_INODE;
}

/** Creates an empty subvolume at `dir` (its parent must exist). */
export async function createSubvolume(dir: string): Promise<void> {
  await runTool('btrfs', ['subvolume', 'create', dir]);
}

/** Snapshots the subvolume `source` to `dest`, which must not exist yet. */
export async function snapshotSubvolume(
  source: string,
  dest: string,
  readOnly: boolean,
): Promise<void> {
  await runTool('btrfs', ['subvolume', 'snapshot', ...(readOnly ? ['-r'] : []), source, dest]);
}

/**
 * Deletes a subvolume, waiting for the commit: without it a crash right after could bring
 * the subvolume back, and "delete leaves nothing behind" would not hold.
 */
export async function deleteSubvolume(dir: string): Promise<void> {
  await runTool('btrfs', ['subvolume', 'delete', '--commit-after', dir]);
}

/** Limits the referenced bytes of the subvolume at `dir` (null removes the limit). */
export async function limitQgroup(dir: string, bytes: number | null): Promise<void> {
  await runTool('btrfs', ['qgroup', 'limit', bytes === null ? 'none' : String(bytes), dir]);
}

/** Turns quota accounting on; the kernel does nothing when it is on already. */
export async function enableQuota(dir: string): Promise<void> {
  await runTool('btrfs', ['quota', 'enable', dir]);
}

/** A level-0 qgroup (one per subvolume) as `btrfs qgroup show -r --raw` prints it. */
export interface QgroupRow {
  subvolumeId: number;
  referenced: number;
  maxReferenced: number | null;
}

/** Parses `btrfs qgroup show -r --raw`: id, referenced, exclusive, max referenced, [path]. */
export function parseQgroupShow(text: string): QgroupRow[] {
  const rows: QgroupRow[] = [];
  for (const line of text.split('\n')) {
    const [id, rfer, _excl, maxRfer] = line.trim().split(/\s+/);
    const m = /^0\/(\d+)$/.exec(id ?? '');
    if (!m?.[1] || rfer === undefined || maxRfer === undefined || !/^\d+$/.test(rfer)) continue;
    rows.push({
      subvolumeId: Number(m[1]),
      referenced: Number(rfer),
      maxReferenced: /^\d+$/.test(maxRfer) ? Number(maxRfer) : null,
    });
  }
  return rows;
}

/** The qgroup of the subvolume at `dir`, or undefined when quotas are off. */
export async function qgroupOf(dir: string): Promise<QgroupRow | undefined> {
  const [{ stdout: idOut }, show] = await Promise.all([
    runTool('btrfs', ['inspect-internal', 'rootid', dir]),
    runTool('btrfs', ['qgroup', 'show', '-r', '--raw', '-f', dir]).catch(() => undefined),
  ]);
  const id = Number(idOut.trim());
  return show ? parseQgroupShow(show.stdout).find((r) => r.subvolumeId === id) : undefined;
}

/** Parses `btrfs subvolume list`: "ID 256 gen 9 top level 5 path a" per line. */
export function parseSubvolumeIds(text: string): number[] {
  const ids: number[] = [];
  for (const line of text.split('\n')) {
    const m = /^ID (\d+) /.exec(line);
    if (m?.[1]) ids.push(Number(m[1]));
  }
  return ids;
}

/**
 * Destroys the qgroups of subvolumes that no longer exist. Older kernels keep a deleted
 * subvolume's qgroup forever (newer ones drop it once the subvolume's blocks are freed);
 * it is only bookkeeping, but a pool that churns through branches would collect
 * thousands. One still being cleaned is busy and is left for the next sweep.
 */
export async function sweepStaleQgroups(mountPoint: string): Promise<number> {
  // Qgroups first, subvolumes second: a subvolume created between the two reads is then
  // in the list, so its fresh qgroup (and limit) is never mistaken for a stale one.
  const qgroups = await runTool('btrfs', ['qgroup', 'show', '-r', '--raw', mountPoint]);
  const subvols = await runTool('btrfs', ['subvolume', 'list', mountPoint]);
  const live = new Set(parseSubvolumeIds(subvols.stdout));
  let destroyed = 0;
  for (const row of parseQgroupShow(qgroups.stdout)) {
    // 5 is the top-level subvolume, which never appears in `subvolume list`.
    if (row.subvolumeId === 5 || live.has(row.subvolumeId)) continue;
    try {
      await runTool('btrfs', ['qgroup', 'destroy', `0/${row.subvolumeId}`, mountPoint]);
      destroyed++;
    } catch {
      // still being cleaned: the next sweep takes it
    }
  }
  return destroyed;
}
