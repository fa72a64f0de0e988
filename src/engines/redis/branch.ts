/**
 * The data of a branch: a consistent copy of the source as it is now, taken without
 * stopping it.
 *
 * - Source stopped: its files are at rest; the pool copies the volume.
 * - Source running with an AOF on btrfs: a subvolume snapshot is atomic, so it holds the
 *   AOF as the server had written it (crash-consistent; a torn last command is dropped
 *   on load by aof-load-truncated). The branch keeps the source's history.
 * - Source running with an AOF on a directory pool: the AOF files are copied in manifest
 *   order (see copyAof), which is a prefix of the history; the branch keeps it too.
 * - Source running without an AOF: BGSAVE (a fork; the source keeps serving) and a copy
 *   of the RDB it wrote.
 */
import { mkdir } from 'node:fs/promises';
import type { EngineEnv, InstanceSpec } from '../engine.js';
import { ownerUid } from '../../host/tree-owner.js';
import { copyAof } from './aof.js';
import type { RedisBinaries } from './binaries.js';
import { freshRdb, withAdmin } from './control.js';
import { copyRegularFile } from './files.js';
import type { RedisPaths } from './paths.js';
import { runningPid } from './process.js';
import type { VolumePaths } from './volumes.js';

/** Copies `source`'s data into a new volume for `target`; returns the target's paths. */
export async function copyForBranch(
  env: EngineEnv,
  vols: VolumePaths,
  bins: RedisBinaries,
  source: InstanceSpec,
  target: InstanceSpec,
): Promise<RedisPaths> {
  const src = await vols.get(env.pool, source.volume);
  if ((await runningPid(src, bins)) === undefined) {
    return vols.snapshot(env, source.volume, target);
  }
  const aof = await withAdmin(src, async (conn) => {
    const reply = await conn.command(['CONFIG', 'GET', 'appendonly']);
    return Array.isArray(reply) && reply[1] === 'yes';
  });
  if (aof && env.pool.kind === 'btrfs') return vols.snapshot(env, source.volume, target);
  const dst = await vols.create(env, target);
  await mkdir(dst.dataDir, { mode: 0o700 });
  // The source's files are the server's to change: read without following links, and
  // only files of its own user (the source's identity, not the branch's).
  const sourceUid = await ownerUid(src.dataDir);
  if (aof) {
    await copyAof(src.aofDir, dst.aofDir, sourceUid);
  } else {
    await withAdmin(src, freshRdb);
    await copyRegularFile(src.rdb, dst.rdb, sourceUid);
  }
  return dst;
}
