/**
 * Which PostgreSQL binaries run which data directory. New databases use the newest major
 * installed; an existing data directory keeps the major it was made with (PG_VERSION),
 * so installing a newer PostgreSQL never points an old cluster at binaries it cannot read.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { findPgBinDir } from '../../host/pg-binaries.js';
import { EngineError } from '../engine.js';
import { readText } from './files.js';

const exec = promisify(execFile);

/** A directory of server binaries and the major version they belong to. */
export interface PgBinaries {
  dir: string;
  major: number;
  /** Whether the contrib module basic_archive is installed (archiving without a shell). */
  basicArchive: boolean;
}

const cache = new Map<string, Promise<PgBinaries>>();

/** Describes the binaries in `dir` (cached: a version does not change under a running pier). */
export function describeBinaries(dir: string): Promise<PgBinaries> {
  let found = cache.get(dir);
  if (!found) {
    found = probe(dir);
    found.catch(() => cache.delete(dir));
    cache.set(dir, found);
  }
  return found;
}

async function probe(dir: string): Promise<PgBinaries> {
  const { stdout } = await exec(path.join(dir, 'postgres'), ['-V']);
  const major = Number(/\(PostgreSQL\)\s+(\d+)/.exec(stdout)?.[1]);
  if (!Number.isInteger(major)) {
    throw new EngineError('failed', `cannot tell the version of ${dir}/postgres: ${stdout}`);
  }
  const libDir = (
    await exec(path.join(dir, 'pg_config'), ['--pkglibdir']).catch(() => undefined)
  )?.stdout.trim();
  const candidates = [libDir, path.join(dir, '..', 'lib')].filter((d): d is string => !!d);
  const basicArchive = candidates.some((d) => existsSync(path.join(d, 'basic_archive.so')));
  return { dir, major, basicArchive };
}

/** The binaries new databases are made with: `configured`, or the newest on the host. */
export async function newestBinaries(configured?: string): Promise<PgBinaries> {
  return describeBinaries(await findPgBinDir(configured));
}

/** The binaries of the major that made `pgdata`. */
export async function binariesFor(pgdata: string, configured?: string): Promise<PgBinaries> {
  const version = ((await readText(path.join(pgdata, 'PG_VERSION')).catch(() => '')) ?? '').trim();
  if (!/^\d+$/.test(version)) {
    throw new EngineError('failed', `${pgdata} is not a PostgreSQL data directory`);
  }
  const debian = path.join('/usr/lib/postgresql', version, 'bin');
  if (existsSync(path.join(debian, 'postgres'))) return describeBinaries(debian);
  const fallback = await newestBinaries(configured);
  if (fallback.major === Number(version)) return fallback;
  throw new EngineError(
    'failed',
    `${pgdata} needs PostgreSQL ${version}, which is not installed (found ${fallback.major})`,
  );
}
