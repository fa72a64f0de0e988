/**
 * One OS identity per managed database, so that one database's server cannot read
 * another's files, nor the platform store's (which runs as the service user).
 *
 * An identity is a system user (and its own group) whose name is derived from a key (the
 * database id): `<prefix><16 hex of sha256(key)>`, made with `useradd --system` on first
 * need, so its uid comes from the host's system range (SYS_UID_MIN..SYS_UID_MAX of
 * /etc/login.defs). The passwd entry is the record: it survives restarts, is found again
 * from the key alone, and carries the key in its comment for an operator. PostgreSQL
 * needs that entry (it looks its uid up at start). `remove` deletes the user and its
 * group; `userdel` itself refuses while a process of the user runs, which guards the
 * sweep of a crashed test run's leftovers.
 *
 * When pier does not run as root every key maps to pier's own user (no users can be
 * made), as the service user does.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { resolveServiceUser, type ServiceUser } from './service-user.js';

const run = promisify(execFile);

/** A valid user-name prefix: lowercase, starts with a letter, leaves room for the hash. */
export const IDENTITY_PREFIX = /^[a-z][a-z0-9-]{0,14}$/;

/** Exit code of useradd/userdel when /etc/passwd is locked by a concurrent change. */
const PASSWD_LOCKED = 10;

export class ServerIdentities {
  private readonly pending = new Map<string, Promise<ServiceUser>>();

  /** `prefix` names every identity this platform makes (tests use their own). */
  constructor(private readonly prefix: string) {
    if (!IDENTITY_PREFIX.test(prefix)) throw new Error(`invalid identity prefix '${prefix}'`);
  }

  /** The user name of `key`'s identity. */
  nameOf(key: string): string {
    return this.prefix + createHash('sha256').update(key).digest('hex').slice(0, 16);
  }

  /** The identity of `key`, created on first need. */
  of(key: string): Promise<ServiceUser> {
    const name = this.nameOf(key);
    let found = this.pending.get(name);
    if (!found) {
      found = this.ensure(name, key).finally(() => this.pending.delete(name));
      this.pending.set(name, found);
    }
    return found;
  }

  private async ensure(name: string, key: string): Promise<ServiceUser> {
    if (!isRoot()) return resolveServiceUser(name);
    const existing = await lookupUser(name);
    if (existing) return existing;
    await withPasswdLock(() =>
      run('useradd', [
        '--system',
        '--user-group',
        '--no-create-home',
        ...['--home-dir', '/nonexistent', '--shell', '/usr/sbin/nologin'],
        ...['--comment', `pier database server ${key}`],
        name,
      ]),
    ).catch(async (err: Error) => {
      // Another process made it meanwhile: fine, it is the same identity.
      if (!(await lookupUser(name))) {
        throw new Error(`cannot create the database identity '${name}': ${err.message}`);
      }
    });
    const made = await lookupUser(name);
    if (!made) throw new Error(`identity '${name}' was created but cannot be found`);
    return made;
  }

  /** Removes `key`'s identity (its user and group); a missing one is fine. */
  async remove(key: string): Promise<void> {
    if (!isRoot()) return;
    await removeUser(this.nameOf(key));
  }

  /**
   * Removes every identity of this prefix that no process runs as (leftovers of a crashed
   * run); returns the names removed. Only for prefixes owned by one run (tests).
   */
  async sweep(): Promise<string[]> {
    if (!isRoot()) return [];
    const removed: string[] = [];
    for (const name of await usersWithPrefix(this.prefix)) {
      if (
        await removeUser(name).then(
          () => true,
          () => false,
        )
      )
        removed.push(name);
    }
    return removed;
  }
}

function isRoot(): boolean {
  return (process.getuid?.() ?? 0) === 0;
}

/** The user `name` from the passwd database, or undefined. */
export async function lookupUser(name: string): Promise<ServiceUser | undefined> {
  const out = await run('getent', ['passwd', name]).then(
    (r) => r.stdout.trim(),
    () => '',
  );
  const fields = out.split(':');
  if (fields.length < 4 || fields[0] !== name) return undefined;
  return { name, uid: Number(fields[2]), gid: Number(fields[3]) };
}

async function usersWithPrefix(prefix: string): Promise<string[]> {
  const text = await readFile('/etc/passwd', 'utf8');
  return text
    .split('\n')
    .map((line) => line.split(':')[0] ?? '')
    .filter((name) => name.startsWith(prefix));
}

/** userdel, which refuses (exit 8) while a process runs as the user; missing is fine. */
async function removeUser(name: string): Promise<void> {
  if (!(await lookupUser(name))) return;
  await withPasswdLock(() => run('userdel', [name]));
}

/** Runs a passwd-changing command again while another change holds the lock. */
async function withPasswdLock<T>(fn: () => Promise<T>): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await fn();
    } catch (err) {
      if ((err as { code?: number }).code !== PASSWD_LOCKED || attempt >= 50) throw err;
      await sleep(50 + Math.random() * 100);
    }
  }
}
