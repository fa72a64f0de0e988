/**
 * Servers pier starts for itself (its embedded store today, customer databases later)
 * never run as root. When pier runs as root they run as an unprivileged service user,
 * created on first need; otherwise they run as the current user.
 */
import { execFile } from 'node:child_process';
import { stat } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

export interface ServiceUser {
  name: string;
  uid: number;
  gid: number;
}

async function lookup(name: string): Promise<ServiceUser | undefined> {
  try {
    const uid = Number((await run('id', ['-u', name])).stdout.trim());
    const gid = Number((await run('id', ['-g', name])).stdout.trim());
    return { name, uid, gid };
  } catch {
    return undefined;
  }
}

/** The identity to run servers as: the configured user when root, else ourselves. */
export async function resolveServiceUser(name: string): Promise<ServiceUser> {
  const uid = process.getuid?.() ?? 0;
  if (uid !== 0) {
    return { name: (await run('id', ['-un'])).stdout.trim(), uid, gid: process.getgid?.() ?? uid };
  }
  const existing = await lookup(name);
  if (existing) return existing;
  await run('useradd', [
    '--system',
    '--user-group',
    '--no-create-home',
    '--home-dir',
    '/nonexistent',
    '--shell',
    '/usr/sbin/nologin',
    name,
  ]).catch((err: Error) => {
    throw new Error(`cannot create the service user '${name}': ${err.message}`);
  });
  const created = await lookup(name);
  if (!created) throw new Error(`service user '${name}' was created but cannot be found`);
  return created;
}

/**
 * Throws a clear error when `user` cannot reach `dir` (for example a data dir under
 * /root, which is mode 0700), instead of letting a server fail later with a bare EACCES.
 */
export async function assertTraversable(dir: string, user: ServiceUser): Promise<void> {
  if (user.uid === 0) return;
  let current = path.resolve(dir);
  for (;;) {
    const st = await stat(current);
    const bit = st.uid === user.uid ? 0o100 : st.gid === user.gid ? 0o010 : 0o001;
    if ((st.mode & bit) === 0) {
      throw new Error(
        `the service user '${user.name}' cannot reach ${dir}: ${current} is not searchable by it ` +
          `(mode ${(st.mode & 0o777).toString(8)}). Choose a data dir outside it (--data-dir) ` +
          `or use an external store (--database-url).`,
      );
    }
    const parent = path.dirname(current);
    if (parent === current) return;
    current = parent;
  }
}
