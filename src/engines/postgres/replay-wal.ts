/**
 * The WAL a restore replays, as the restoring server's own copy. A fork runs as another
 * identity than the database whose archive it reads, and that identity must not be able
 * to read the archive (nor anything else of the source): so pier, as root, copies what
 * the replay needs (the segments from the base's start on, and the timeline histories)
 * into a scratch volume (links copied as links, never followed) owned by the target's identity, and removes it once the restore
 * is promoted. On btrfs the copy shares extents (reflink); on a directory pool it costs
 * the WAL's size for the duration of the restore.
 */
import { mkdir, readdir } from 'node:fs/promises';
import path from 'node:path';
import { handOverTree } from '../../host/tree-owner.js';
import type { EngineEnv, InstanceSpec } from '../engine.js';
import { isWalBefore, startSegment, type BaseManifest } from './archive.js';
import type { ArchivePaths } from './archive-volume.js';
import { run } from './exec.js';

/** Files per cp run: well below the kernel's limit on one command line. */
const BATCH = 500;

/** The scratch volume of `target`'s restore. */
export function replayVolume(target: InstanceSpec): string {
  return `${target.volume}-replay`;
}

/** Copies the WAL a restore from `base` reads into `target`'s scratch volume; its directory. */
export async function copyReplayWal(
  env: EngineEnv,
  target: InstanceSpec,
  archive: ArchivePaths,
  base: BaseManifest,
): Promise<string> {
  await dropReplayWal(env, target); // what an interrupted attempt left
  const owner = { uid: env.user.uid, gid: env.user.gid };
  const volume = await env.pool.create(replayVolume(target), { owner });
  const dir = path.join(volume.path, 'wal');
  await mkdir(dir, { mode: 0o700 });
  const from = await startSegment(archive, base);
  const files = (await readdir(archive.wal))
    .filter((entry) => !from || !isWalBefore(entry, from))
    .map((entry) => path.join(archive.wal, entry));
  for (let i = 0; i < files.length; i += BATCH) {
    await run(env, 'cp', ['-P', '--reflink=auto', '-t', dir, '--', ...files.slice(i, i + BATCH)], {
      asRoot: true,
      timeoutMs: 24 * 3_600_000,
    });
  }
  await handOverTree(volume.path, owner);
  return dir;
}

/** Removes `target`'s scratch volume, if any. */
export async function dropReplayWal(env: EngineEnv, target: InstanceSpec): Promise<void> {
  if (await env.pool.info(replayVolume(target))) await env.pool.destroy(replayVolume(target));
}
