/** The host's Redis programs: the server and redis-check-aof (which cuts AOFs for forks). */
import { access, constants, realpath } from 'node:fs/promises';
import path from 'node:path';
import { EngineError } from '../engine.js';

/** A fixed search path: a service manager's PATH may lack the usual directories. */
const SEARCH_PATH = ['/usr/local/bin', '/usr/bin', '/usr/local/sbin', '/usr/sbin', '/bin'];

export interface RedisBinaries {
  server: string;
  checkAof: string;
  /** The file the server's /proc/<pid>/exe points at (Debian's redis-server is a symlink). */
  serverReal: string;
}

let found: Promise<RedisBinaries> | undefined;

async function find(name: string): Promise<string> {
  for (const dir of SEARCH_PATH) {
    const candidate = path.join(dir, name);
    try {
      await access(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not in this directory
    }
  }
  throw new EngineError(
    'failed',
    `${name} is not installed (looked in ${SEARCH_PATH.join(', ')}); install the redis-server package`,
  );
}

/** The binaries, looked up once per process. */
export function redisBinaries(): Promise<RedisBinaries> {
  found ??= (async () => {
    const server = await find('redis-server');
    const checkAof = await find('redis-check-aof');
    return { server, checkAof, serverReal: await realpath(server) };
  })().catch((err: unknown) => {
    found = undefined;
    throw err;
  });
  return found;
}
