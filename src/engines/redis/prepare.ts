/**
 * Turns a copy of another instance's data (a branch or a fork) into an instance of its
 * own: the copied tree is taken over by root (links and leftovers removed), the data
 * takes the form the target's persistence needs, and the marker records it complete.
 * Until the marker is written a rerun starts over.
 */
import { mkdir, rm, stat } from 'node:fs/promises';
import type { EngineEnv, InstanceSpec } from '../engine.js';
import { rdbToAofBase, readManifest } from './aof.js';
import type { RedisBinaries } from './binaries.js';
import { withAdmin } from './control.js';
import { closeDir, releaseTree, seizeTree } from './files.js';
import { historyDir } from './generations.js';
import { clearCopiedState, writeLayout } from './layout.js';
import type { RedisPaths } from './paths.js';
import { startServerWith, stopServer } from './server.js';
import { markComplete } from './volumes.js';

const exists = (p: string) =>
  stat(p).then(
    () => true,
    () => false,
  );

/**
 * Makes the copied data at `paths` the complete, independent instance `target`: a
 * persistent target loads an AOF (an RDB becomes its base), a non-persistent one an RDB
 * (an AOF is loaded once by a private server run and saved as an RDB).
 */
export async function prepareCopy(
  env: EngineEnv,
  target: InstanceSpec,
  paths: RedisPaths,
  bins: RedisBinaries,
): Promise<void> {
  await closeDir(paths.root);
  // The copy's history starts at its own data. The source's AOF generations (in a
  // snapshot of its volume) go first: their hard links would also make seizeTree take
  // the live AOF files for planted links.
  await rm(historyDir(paths), { recursive: true, force: true });
  await mkdir(paths.dataDir, { recursive: true, mode: 0o700 });
  await seizeTree(paths.dataDir);
  await clearCopiedState(paths);
  const hasAof = (await readManifest(paths.aofDir)) !== undefined;
  const hasRdb = await exists(paths.rdb);
  if (target.archive) {
    // A persistent server ignores an RDB; its history starts from the snapshot instead.
    if (!hasAof && hasRdb) await rdbToAofBase(paths.rdb, paths.aofDir);
    else if (hasAof) await rm(paths.rdb, { force: true });
  }
  await releaseTree(paths.dataDir, env.user);
  await writeLayout(env, target, paths);
  if (!target.archive && hasAof) await aofToRdb(env, paths, bins);
  await markComplete(paths, target.id);
}

/**
 * Loads the AOF in a server that only the platform can reach (no TLS port) and saves it
 * as the RDB a non-persistent server loads; the AOF is removed afterwards.
 */
async function aofToRdb(env: EngineEnv, paths: RedisPaths, bins: RedisBinaries): Promise<void> {
  await startServerWith(env, paths, bins, ['--appendonly', 'yes', '--tls-port', '0']);
  try {
    await withAdmin(paths, (conn) => conn.command(['SAVE'], 60 * 60_000));
  } finally {
    await stopServer(env, paths, bins, 'immediate');
  }
  await rm(paths.aofDir, { recursive: true, force: true });
}
