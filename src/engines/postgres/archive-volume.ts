/**
 * An archive is a pool volume named after its id: `wal/` holds the segments the server
 * ships (basic_archive writes them under a temporary name and renames), and `base/` the
 * base backups, each `base/<label>/` (a plain data directory copy) with `base/<label>.json`
 * beside it, written last: a base without its manifest is not complete.
 */
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { handOverIfForeign } from '../../host/tree-owner.js';
import type { ArchiveRef, EngineEnv } from '../engine.js';
import { EngineError } from '../engine.js';
import { ownDir } from './files.js';

/** Paths inside an archive volume. */
export interface ArchivePaths {
  root: string;
  wal: string;
  base: string;
}

/** The paths of the archive volume at `root`. */
export function archivePaths(root: string): ArchivePaths {
  return { root, wal: path.join(root, 'wal'), base: path.join(root, 'base') };
}

/** The archive's paths, or undefined when its volume does not exist. */
export async function findArchive(
  env: EngineEnv,
  archive: ArchiveRef,
): Promise<ArchivePaths | undefined> {
  const info = await env.pool.info(archive.id);
  return info ? archivePaths(info.path) : undefined;
}

/** The archive's paths; its volume must exist. */
export async function requireArchive(env: EngineEnv, archive: ArchiveRef): Promise<ArchivePaths> {
  const found = await findArchive(env, archive);
  if (!found) throw new EngineError('failed', `the archive ${archive.id} does not exist`);
  return found;
}

/** Makes the archive volume and its directories (owned by the service user) if missing. */
export async function ensureArchive(env: EngineEnv, archive: ArchiveRef): Promise<ArchivePaths> {
  let info = await env.pool.info(archive.id);
  if (!info) {
    const owner = { uid: env.user.uid, gid: env.user.gid };
    info = await env.pool.create(archive.id, { owner }).catch(async (err: unknown) => {
      // Someone made it meanwhile: fine, it is the same archive.
      const again = await env.pool.info(archive.id);
      if (again) return again;
      throw err;
    });
  }
  // An archive of an older pier (one user for every server) becomes its writer's.
  await handOverIfForeign(info.path, env.user);
  const paths = archivePaths(info.path);
  for (const dir of [paths.wal, paths.base]) {
    await mkdir(dir, { recursive: true, mode: 0o700 });
    await ownDir(env.user, dir);
  }
  return paths;
}
