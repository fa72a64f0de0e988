/**
 * Where the host's PostgreSQL server binaries are: the platform's own store and the managed
 * PostgreSQL engine both run them.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** Finds the newest PostgreSQL server binaries installed on the host. */
export async function findPgBinDir(configured?: string): Promise<string> {
  const candidates: string[] = [];
  if (configured) candidates.push(configured);
  const root = '/usr/lib/postgresql';
  if (existsSync(root)) {
    const versions = (await readdir(root)).filter((v) => /^\d+$/.test(v));
    versions.sort((a, b) => Number(b) - Number(a));
    candidates.push(...versions.map((v) => path.join(root, v, 'bin')));
  }
  try {
    candidates.push((await run('pg_config', ['--bindir'])).stdout.trim());
  } catch {
    // pg_config is optional; the Debian layout above is the usual source.
  }
  for (const dir of candidates) {
    if (existsSync(path.join(dir, 'postgres')) && existsSync(path.join(dir, 'initdb'))) return dir;
  }
  throw new Error(
    'no PostgreSQL server binaries found (looked in /usr/lib/postgresql/*/bin). ' +
      'Run ./scripts/setup.sh, set PIER_PG_BIN_DIR, or use --database-url.',
  );
}
