/**
 * What SFTP clients are told, and how their paths are read: a path relative to the
 * machine's working directory made absolute (the files service then confines it), the
 * canonical form REALPATH answers, and a file's attributes and `ls -l` line.
 */
import { constants } from 'node:fs';
import type { Attributes } from 'ssh2';
import type { FileStat } from '../runtime/files/guest-tree.js';

/** The longest path taken, as the files route's. */
const PATH_MAX = 4096;

/** A path SFTP cannot mean: said to the client as `bad-request`. */
export class BadPath extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'BadPath';
  }
}

/**
 * `path` as the machine would read it from `cwd`: absolute as is, else under `cwd`. The
 * `..` and symlinks in it are left to the files service, which refuses a way out.
 */
export function absolute(cwd: string, path: string): string {
  if (path.length > PATH_MAX) throw new BadPath(`a path holds at most ${PATH_MAX} bytes`);
  if (path.includes('\0')) throw new BadPath('a path holds no NUL byte');
  if (path.startsWith('/')) return path;
  if (path === '' || path === '.') return cwd;
  return `${cwd.replace(/\/+$/, '')}/${path}`;
}

/**
 * The canonical form of `path` (REALPATH): absolute, without `.`, `..` or repeated
 * slashes, worked out from the text alone (symlinks are followed by the operations
 * themselves, inside the machine). A `..` above the root names nothing in the machine
 * and is refused, as the files service refuses it, rather than clamped.
 */
export function canonical(cwd: string, path: string): string {
  const parts: string[] = [];
  for (const part of absolute(cwd, path).split('/')) {
    if (part === '' || part === '.') continue;
    if (part === '..') {
      if (parts.length === 0) throw new BadPath(`${path} leads outside the machine's filesystem`);
      parts.pop();
    } else {
      parts.push(part);
    }
  }
  return `/${parts.join('/')}`;
}

/** SFTP's attributes of a file: its type and permission bits, size, ids and times. */
export function attrsOf(st: FileStat): Attributes {
  return {
    mode: st.mode,
    size: st.size,
    uid: st.uid,
    gid: st.gid,
    atime: Math.floor(st.atime.getTime() / 1000),
    mtime: Math.floor(st.mtime.getTime() / 1000),
  };
}

const TYPE_LETTER = new Map<number, string>([
  [constants.S_IFREG, '-'],
  [constants.S_IFDIR, 'd'],
  [constants.S_IFLNK, 'l'],
  [constants.S_IFIFO, 'p'],
  [constants.S_IFSOCK, 's'],
  [constants.S_IFCHR, 'c'],
  [constants.S_IFBLK, 'b'],
]);

const MONTHS = 'Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec'.split(' ');

/** `rwx` of the permission bits of `mode`, the set-id and sticky bits as `ls` shows them. */
function permissions(mode: number): string {
  const rwx = (bits: number, special: boolean, on: string, off: string) =>
    `${bits & 4 ? 'r' : '-'}${bits & 2 ? 'w' : '-'}${bits & 1 ? (special ? on : 'x') : special ? off : '-'}`;
  return (
    rwx(mode >> 6, (mode & 0o4000) !== 0, 's', 'S') +
    rwx(mode >> 3, (mode & 0o2000) !== 0, 's', 'S') +
    rwx(mode, (mode & 0o1000) !== 0, 't', 'T')
  );
}

/** The `ls -l` line of a listing entry, as OpenSSH's server writes it (clients show it as is). */
export function longname(name: string, st: FileStat, now = new Date()): string {
  const type = TYPE_LETTER.get(st.mode & constants.S_IFMT) ?? '?';
  const m = st.mtime;
  // A file older than six months, or in the future, shows its year instead of its time.
  const recent = Math.abs(now.getTime() - m.getTime()) < 182 * 24 * 3600 * 1000;
  const pad = (n: number) => String(n).padStart(2, '0');
  const when = recent
    ? `${pad(m.getUTCHours())}:${pad(m.getUTCMinutes())}`
    : ` ${m.getUTCFullYear()}`;
  const date = `${MONTHS[m.getUTCMonth()]} ${String(m.getUTCDate()).padStart(2)} ${when}`;
  return [
    `${type}${permissions(st.mode)}`,
    '   1',
    String(st.uid).padEnd(8),
    String(st.gid).padEnd(8),
    String(st.size).padStart(8),
    date,
    name,
  ].join(' ');
}
