/**
 * Where the servers pier runs as other users (the embedded store as the service user,
 * managed databases as their identities) keep their files: the store's cluster and the
 * storage pool. Normally that is the data dir itself. But a data dir inside a directory
 * other users cannot enter (the default `./.pier` of a clone under /root, mode 0700) is
 * out of their reach, whatever its own mode. Rather than opening the operator's home to
 * every database's uid, pier then keeps these two parts under /var/lib/pier, in a
 * directory named after the data dir, and everything of its own (keys, token, objects,
 * images, machines) stays in the data dir.
 */
import { createHash } from 'node:crypto';
import { chmod, mkdir, stat } from 'node:fs/promises';
import path from 'node:path';

/** Parent of the server dirs of data dirs that other users cannot reach. */
export const SERVER_DIRS_ROOT = '/var/lib/pier';

/** The server dir a data dir out of other users' reach gets (a fixed function of its path). */
export function outsideServerDir(dataDir: string): string {
  const digest = createHash('sha256').update(path.resolve(dataDir)).digest('hex').slice(0, 12);
  return path.join(SERVER_DIRS_ROOT, `servers-${digest}`);
}

/**
 * Whether a user that is neither the owner nor in the group can pass through every
 * existing ancestor of `dir` (those still to be made, pier makes 0711).
 */
export async function reachableByOthers(dir: string): Promise<boolean> {
  let current = path.resolve(dir);
  for (;;) {
    const st = await stat(current).catch(() => undefined);
    if (st && (st.mode & 0o001) === 0) return false;
    const parent = path.dirname(current);
    if (parent === current) return true;
    current = parent;
  }
}

/**
 * The server dir of `dataDir`: `configured` when given; the data dir when pier is not
 * root (its servers run as itself) or when other users reach it; else, made 0711,
 * {@link outsideServerDir}.
 */
export async function resolveServerDir(dataDir: string, configured?: string): Promise<string> {
  if (configured) return path.resolve(configured);
  if ((process.getuid?.() ?? 0) !== 0 || (await reachableByOthers(dataDir))) return dataDir;
  const dir = outsideServerDir(dataDir);
  for (const d of [SERVER_DIRS_ROOT, dir]) {
    await mkdir(d, { recursive: true, mode: 0o711 });
    await chmod(d, 0o711);
  }
  return dir;
}
