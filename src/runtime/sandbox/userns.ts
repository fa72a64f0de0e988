/**
 * The identity of a machine on the host: every machine runs in a user namespace that maps
 * its uids and gids 0–65535 to the host's 200000–265535, a range no host account uses.
 * Machine root is host uid 200000: outside its namespaces it holds no capability and owns
 * nothing of the host's, so a file or a /proc/sys entry that its mounts fail to cover
 * still refuses it by plain permissions. Image layers and writable layers are owned by
 * that range on the host (see `hostId`).
 *
 * A machine's network namespace must belong to its user namespace: `runc exec` joins the
 * user namespace first, and from there may enter only namespaces that user namespace
 * owns. So both are made here, together, and kept as files (bind mounts of the nsfs
 * inodes): the user namespace at `<usernsDir>/<name>`, the network namespace at
 * `/run/netns/<name>` where `ip netns` finds it.
 */
import { spawn } from 'node:child_process';
import {
  chmod,
  lchown,
  lstat,
  mkdir,
  readdir,
  readFile,
  readlink,
  rm,
  stat,
  writeFile,
} from 'node:fs/promises';
import path from 'node:path';
import { run } from './exec.js';
import { sleep } from './proc.js';

/** The host uid and gid a machine's 0 is; the range runs GUEST_ID_COUNT ids from it. */
export const GUEST_ID_BASE = 200_000;
export const GUEST_ID_COUNT = 65_536;

/** Where the user namespaces of machines are kept (on /run: gone with a reboot, as netns are). */
export const USERNS_DIR = '/run/pier/userns';
const NETNS_DIR = '/run/netns';

/** The host id of a machine's uid or gid `id`. */
export function hostId(id: number): number {
  if (!Number.isInteger(id) || id < 0 || id >= GUEST_ID_COUNT) {
    throw new Error(`id ${id} is outside a machine's range 0–${GUEST_ID_COUNT - 1}`);
  }
  return GUEST_ID_BASE + id;
}

/**
 * The host id of an image's uid or gid `id` in a machine's root: shifted into the range;
 * an id beyond it (rare: some images own files by uid 100000+) becomes nobody (65534).
 */
export function imageOwner(id: number): number {
  return GUEST_ID_BASE + (id >= 0 && id < GUEST_ID_COUNT ? id : 65534);
}

/** The machine's view of host id `id`: its own ids, or the overflow id 65534 (nobody). */
export function guestId(id: number): number {
  const inner = id - GUEST_ID_BASE;
  return inner >= 0 && inner < GUEST_ID_COUNT ? inner : 65534;
}

/** The kernel's uid_map / gid_map line. */
export const ID_MAP = `0 ${GUEST_ID_BASE} ${GUEST_ID_COUNT}\n`;

/** The file holding user namespace `name`. */
export function usernsFile(name: string): string {
  return path.join(USERNS_DIR, name);
}

/** Whether something is mounted at `file` (the paths here hold no characters mountinfo escapes). */
const isMounted = async (file: string) =>
  (await readFile('/proc/self/mountinfo', 'utf8'))
    .split('\n')
    .some((line) => line.split(' ')[4] === file);

/**
 * Makes user namespace `name` (mapped as above) and a network namespace it owns, both
 * kept as files; returns the user namespace's file. Idempotent: existing ones are kept.
 * A holder process (`unshare … cat`, run with argument arrays) creates them and lives
 * only until both are bound.
 */
export async function createMachineNamespaces(name: string): Promise<string> {
  const userns = usernsFile(name);
  const netns = path.join(NETNS_DIR, name);
  if ((await isMounted(userns)) && (await isMounted(netns))) return userns;
  await releaseMachineNamespaces(name);
  await mkdir(USERNS_DIR, { recursive: true, mode: 0o700 });
  await mkdir(NETNS_DIR, { recursive: true, mode: 0o755 });
  const holder = spawn('unshare', ['--user', '--net', '--', 'cat'], {
    stdio: ['pipe', 'ignore', 'ignore'],
  });
  try {
    const pid = holder.pid;
    if (pid === undefined) throw new Error('unshare could not be started');
    await waitUnshared(pid);
    await writeFile(`/proc/${pid}/uid_map`, ID_MAP);
    await writeFile(`/proc/${pid}/gid_map`, ID_MAP);
    for (const [kind, file] of [
      ['user', userns],
      ['net', netns],
    ] as const) {
      await writeFile(file, '', { mode: 0o444 });
      await run(['mount', '--bind', `/proc/${pid}/ns/${kind}`, file]);
    }
    return userns;
  } catch (err) {
    await releaseMachineNamespaces(name);
    throw err;
  } finally {
    holder.stdin?.end();
  }
}

/** Waits until process `pid` is in user and network namespaces of its own. */
async function waitUnshared(pid: number): Promise<void> {
  const mine = await Promise.all(['user', 'net'].map((k) => readlink(`/proc/self/ns/${k}`)));
  const deadline = Date.now() + 5_000;
  for (;;) {
    const theirs = await Promise.all(
      ['user', 'net'].map((k) => readlink(`/proc/${pid}/ns/${k}`).catch(() => undefined)),
    );
    if (theirs.every((t, i) => t !== undefined && t !== mine[i])) return;
    if (theirs.some((t) => t === undefined)) throw new Error('unshare ended before it unshared');
    if (Date.now() > deadline) throw new Error('unshare did not make its namespaces in 5 s');
    await sleep(1);
  }
}

/** Removes what `createMachineNamespaces(name)` made; missing parts are fine. */
export async function releaseMachineNamespaces(name: string): Promise<void> {
  for (const file of [path.join(NETNS_DIR, name), usernsFile(name)]) {
    if (await isMounted(file)) await run(['umount', '--lazy', file]);
    await rm(file, { force: true });
  }
}

/**
 * Lets the machines' range pass through every directory above `target` (adds o+x where
 * missing, never read): runc binds a machine's root and volumes from inside its user
 * namespace, as host uid 200000, so each directory on the way must let that uid search
 * it. A data directory under a 0700 home is the usual case.
 */
export async function ensureTraversable(target: string): Promise<void> {
  for (let dir = path.dirname(path.resolve(target)); ; dir = path.dirname(dir)) {
    const st = await stat(dir);
    if ((st.mode & 0o001) === 0) await chmod(dir, (st.mode & 0o7777) | 0o001);
    if (dir === '/') return;
  }
}

/**
 * Shifts the owner of `dir` and everything under it into the machines' range, as if its
 * files had been unpacked for machines (tests build roots from host files this way).
 * Symlinks are not followed; ids already in the range are left.
 */
export async function shiftOwnership(dir: string): Promise<void> {
  const st = await lstat(dir);
  if (st.uid < GUEST_ID_BASE) await lchown(dir, imageOwner(st.uid), imageOwner(st.gid));
  if (!st.isDirectory()) return;
  for (const name of await readdir(dir)) await shiftOwnership(path.join(dir, name));
}
