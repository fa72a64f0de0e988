/**
 * The image's `User` (`name`, `uid`, `uid:gid`, `name:group`…) as numbers, looked up in
 * the machine's own /etc/passwd and /etc/group. Those files are read from the overlay
 * root on the host, where an image (or a machine's earlier run, through its writable
 * layer) may have made them symlinks to `/etc/shadow` or a fifo: every path is resolved
 * as the machine would see it (resolveInRoot), opened without following a last symlink or
 * blocking, and read only when it is a small regular file.
 */
import { constants } from 'node:fs';
import { open } from 'node:fs/promises';
import path from 'node:path';
import { resolveInRoot } from '../sandbox/index.js';

/** A resolved user: who the process runs as, and its home from /etc/passwd. */
export interface MachineUser {
  uid: number;
  gid: number;
  /**
   * Supplementary groups: those whose member list in /etc/group names the user (as
   * Docker and a login give them), besides `gid`; absent when none.
   */
  groups?: number[];
  home?: string;
}

/** The machine's ids: what its user namespace maps (sandbox/userns.ts). */
const GUEST_IDS = 65536;

/** A User the image names but its files do not define. */
export class UserError extends Error {
  override readonly name = 'UserError';
}

const MAX_FILE = 4 * 1024 * 1024;
const ID = /^\d+$/;
const MAX_ID = 4294967294;

/** The text of `file` (absolute, inside the machine) in `root`, or undefined when absent or odd. */
export async function readInRoot(root: string, file: string): Promise<string | undefined> {
  const inside = await resolveInRoot(root, file);
  const flags = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;
  const handle = await open(path.join(root, inside), flags).catch(() => undefined);
  if (!handle) return undefined;
  try {
    const st = await handle.stat();
    if (!st.isFile() || st.size > MAX_FILE) return undefined;
    return await handle.readFile('utf8');
  } finally {
    await handle.close();
  }
}

/** Colon-separated records of a passwd or group file, comments and blanks skipped. */
function records(text: string | undefined): string[][] {
  return (text ?? '')
    .split('\n')
    .filter((l) => l.trim() !== '' && !l.startsWith('#'))
    .map((l) => l.split(':'));
}

function numeric(value: string, what: string): number {
  const n = Number(value);
  if (!ID.test(value) || n > MAX_ID)
    throw new UserError(`invalid ${what} ${JSON.stringify(value)}`);
  return n;
}

/**
 * Resolves `user` (the image's User; empty or absent: root) against the files in `root`.
 * A numeric uid needs no passwd entry (its gid is then 0, as in Docker); a name must
 * have one. Throws UserError for a name or group the image does not define.
 */
export async function resolveUser(root: string, user: string | undefined): Promise<MachineUser> {
  const spec = user?.trim() ?? '';
  const [who = '', group] = spec === '' ? ['0'] : spec.split(/:(.*)/s, 2);
  const passwd = records(await readInRoot(root, '/etc/passwd'));
  const entry = ID.test(who) ? passwd.find((r) => r[2] === who) : passwd.find((r) => r[0] === who);
  if (!ID.test(who) && !entry) {
    throw new UserError(`user ${JSON.stringify(who)} is not in the image's /etc/passwd`);
  }
  const uid = numeric(ID.test(who) ? who : (entry![2] ?? ''), 'uid');
  let gid = entry?.[3] && ID.test(entry[3]) ? Number(entry[3]) : 0;
  const groupFile = records(await readInRoot(root, '/etc/group'));
  if (group !== undefined && group !== '') {
    if (ID.test(group)) gid = numeric(group, 'gid');
    else {
      const g = groupFile.find((r) => r[0] === group);
      if (!g)
        throw new UserError(`group ${JSON.stringify(group)} is not in the image's /etc/group`);
      gid = numeric(g[2] ?? '', 'gid');
    }
  }
  const name = entry?.[0];
  const groups = name
    ? [
        ...new Set(
          groupFile
            .filter((r) => (r[3] ?? '').split(',').includes(name))
            .map((r) => (ID.test(r[2] ?? '') ? Number(r[2]) : -1))
            .filter((g) => g >= 0 && g < GUEST_IDS && g !== gid),
        ),
      ]
    : [];
  const home = entry?.[5];
  return { uid, gid, ...(groups.length ? { groups } : {}), ...(home ? { home } : {}) };
}
