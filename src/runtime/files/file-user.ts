/**
 * Whom the files API acts as, and what that user may do to a file: the machine's user,
 * with the rights of the machine's main process, judged by the kernel's own rules
 * (`generic_permission`, `check_sticky`) on the stats of the very inode pier then uses.
 *
 * Why a check in pier's process, not the operation done by a process with the user's
 * credentials. Node can give a child a uid and gid but no supplementary groups, and
 * machine root's rights (Docker's capabilities, valid only over the machine's own ids)
 * exist only inside the machine's user namespace, which Node cannot enter: a child
 * would be `nsenter` plus a second Node (40 MB, and 160–710 ms to start on this host
 * depending on its load, per request), with timeouts, kills and a protocol to stream
 * bytes back. `runc exec` costs more and needs a running machine and a tool in the
 * image. The check costs one `fstat` of an open handle per directory walked (a read 5
 * directories deep: 1.2 → 2.3 ms on the loaded test host) and cannot block.
 *
 * The race we accept: every check is made on the stats of an open handle (the directory
 * looked up in, the file opened), never on a name, so the machine cannot swap what is
 * checked for what is used. A permission the machine changes after the check is seen
 * only by the next request, which is what the machine's user would get from a file it
 * had opened an instant earlier.
 *
 * What is not modelled: POSIX ACLs (Node cannot read them). A file with an ACL shows
 * its mask as the group bits; a named user or group of the ACL is judged by the other
 * bits (refused more than the kernel would), and an owning group the ACL narrows below
 * the mask is given the mask (more than the kernel would, within the machine's own ids
 * only). Read-only mounts and immutable files refuse pier as they refuse the machine.
 */
import type { Stats } from 'node:fs';
import { GUEST_ID_BASE, GUEST_ID_COUNT } from '../sandbox/userns.js';

/** The user a files request acts as, in host ids (the machine's shifted into its range). */
export interface FileUser {
  /** The file system uid and gid of the machine's main process. */
  uid: number;
  gid: number;
  /** Its supplementary groups. */
  groups: readonly number[];
  /** Capabilities that bypass file permissions (root's in the machine), from its `CapEff`. */
  dacOverride: boolean;
  dacReadSearch: boolean;
  fowner: boolean;
}

/** Access wanted, as in `access(2)`. */
export const MAY_READ = 4;
export const MAY_WRITE = 2;
export const MAY_EXEC = 1;

/** The machine's user may not do this to the file (its permissions, or a read-only mount). */
export class PermissionDeniedError extends Error {
  constructor(
    readonly path: string,
    readonly action: 'read' | 'write' | 'list' | 'search' | 'replace' | 'remove' | 'rename',
    readonly reason = "by the file's permissions",
  ) {
    super(`the machine's user may not ${action} ${path} (${reason})`);
    this.name = 'PermissionDeniedError';
  }
}

const inRange = (id: number) => id >= GUEST_ID_BASE && id < GUEST_ID_BASE + GUEST_ID_COUNT;

/**
 * A capability of the machine counts only over an inode whose owner and group its user
 * namespace maps (the kernel's `capable_wrt_inode_uidgid`): root inside may override the
 * permissions of the machine's files, never of a host file bound into it.
 */
const mapped = (st: Stats) => inRange(st.uid) && inRange(st.gid);

/** Whether `user` may access the inode of `st` as `want` (MAY_* bits), as the kernel judges. */
export function mayAccess(st: Stats, user: FileUser, want: number): boolean {
  const cls =
    st.uid === user.uid
      ? st.mode >> 6
      : st.gid === user.gid || user.groups.includes(st.gid)
        ? st.mode >> 3
        : st.mode;
  if ((cls & want & 7) === want) return true;
  if (!mapped(st)) return false;
  const dir = st.isDirectory();
  // CAP_DAC_OVERRIDE: anything but executing a file that no one may execute.
  if (user.dacOverride && (dir || !(want & MAY_EXEC) || (st.mode & 0o111) !== 0)) return true;
  // CAP_DAC_READ_SEARCH: reading anything, searching directories.
  return user.dacReadSearch && !(want & MAY_WRITE) && (dir || !(want & MAY_EXEC));
}

/**
 * Whether `user` may remove or replace the entry `file` of directory `dir` beyond the
 * directory's own write permission: in a sticky directory (`/tmp`) only the file's or the
 * directory's owner may, or CAP_FOWNER over the file (the kernel's `check_sticky`).
 */
export function mayReplace(dir: Stats, file: Stats, user: FileUser): boolean {
  if ((dir.mode & 0o1000) === 0) return true;
  if (file.uid === user.uid || dir.uid === user.uid) return true;
  return user.fowner && mapped(file);
}

/** Capability numbers (linux/capability.h). */
const CAP_DAC_OVERRIDE = 1n;
const CAP_DAC_READ_SEARCH = 2n;
const CAP_FOWNER = 3n;

/**
 * The user of a process from its `/proc/<pid>/status` (read from the host, so in host
 * ids): its file system uid and gid (what the kernel checks), its groups and the
 * capabilities above from `CapEff`. `extraGroups` (host gids) are added to its groups.
 */
export function userOfStatus(status: string, extraGroups: readonly number[] = []): FileUser {
  const field = (name: string) =>
    status
      .split('\n')
      .find((l) => l.startsWith(`${name}:`))
      ?.slice(name.length + 1)
      .trim()
      .split(/\s+/)
      .filter((v) => v !== '');
  const ids = (name: string) => {
    const values = field(name)?.map(Number);
    // Real, effective, saved, file system: the last is what permissions are checked with.
    const fs = values?.[3];
    if (fs === undefined || !Number.isInteger(fs)) throw new Error(`no ${name} in the status`);
    return fs;
  };
  const capEff = BigInt(`0x${field('CapEff')?.[0] ?? '0'}`);
  const has = (cap: bigint) => (capEff & (1n << cap)) !== 0n;
  const groups = new Set([...(field('Groups') ?? []).map(Number), ...extraGroups]);
  return {
    uid: ids('Uid'),
    gid: ids('Gid'),
    groups: [...groups].filter((g) => Number.isInteger(g)),
    dacOverride: has(CAP_DAC_OVERRIDE),
    dacReadSearch: has(CAP_DAC_READ_SEARCH),
    fowner: has(CAP_FOWNER),
  };
}

/**
 * The groups that the machine's `/etc/group` lists the user of uid `uid` in (by the
 * name `/etc/passwd` gives that uid), as the machine numbers them: what `login` or
 * Docker's `--user name` would give it besides its primary group.
 */
export function imageGroups(passwd: string, group: string, uid: number): number[] {
  const rows = (text: string) =>
    text
      .split('\n')
      .filter((l) => l.trim() !== '' && !l.startsWith('#'))
      .map((l) => l.split(':'));
  const name = rows(passwd).find((r) => r[2] === String(uid))?.[0];
  if (!name) return [];
  return rows(group)
    .filter((r) => (r[3] ?? '').split(',').includes(name))
    .map((r) => Number(r[2]))
    .filter((g) => Number.isInteger(g) && g >= 0 && g < GUEST_ID_COUNT);
}
