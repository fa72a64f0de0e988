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
  rm,
  stat,
  statfs,
  writeFile,
} from 'node:fs/promises';
import path from 'node:path';
import { run } from './exec.js';

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

/** statfs type of nsfs: a namespace kept as a file is a bind mount of an nsfs inode. */
const NSFS_MAGIC = 0x6e736673;

/**
 * Whether `file` holds a namespace (a bind mount of an nsfs inode), by one statfs; an
 * empty file left by a half-made namespace, or no file, is not one.
 */
export const isNamespaceFile = (file: string) =>
  statfs(file).then(
    (st) => st.type === NSFS_MAGIC,
    () => false,
  );

/**
 * A process alone in a new user namespace (mapped as above) and a network namespace that
 * user namespace owns: both live as long as it does, long enough to be kept as files
 * (`keepUserns`, `ip netns attach`). `release` lets it exit.
 */
export interface NamespaceHolder {
  pid: number;
  release(): void;
}

/**
 * Starts a holder: `unshare --user --net -- cat` (argument arrays), which echoes a byte
 * once `cat` runs, that is once unshare has made both namespaces; the maps are then
 * written from here, as host root. One spawn and no polling.
 */
export async function spawnNamespaceHolder(): Promise<NamespaceHolder> {
  const holder = spawn('unshare', ['--user', '--net', '--', 'cat'], {
    stdio: ['pipe', 'pipe', 'ignore'],
  });
  const release = () => {
    holder.stdin?.end();
    holder.stdout?.destroy();
  };
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error('unshare did not make its namespaces in 5 s')),
        5_000,
      );
      const settle = (err?: Error) => {
        clearTimeout(timer);
        if (err) reject(err);
        else resolve();
      };
      holder.once('error', (err) => settle(err));
      holder.once('exit', () => settle(new Error('unshare ended before it unshared')));
      holder.stdout?.once('data', () => settle());
      holder.stdin?.write('.');
    });
    const pid = holder.pid as number;
    await writeFile(`/proc/${pid}/uid_map`, ID_MAP);
    await writeFile(`/proc/${pid}/gid_map`, ID_MAP);
    return { pid, release };
  } catch (err) {
    release();
    if (holder.exitCode === null) holder.kill('SIGKILL');
    throw err;
  }
}

/** Keeps the user namespace of holder `pid` as `<usernsDir>/<name>` (a bind mount). */
export async function keepUserns(name: string, pid: number): Promise<void> {
  const file = usernsFile(name);
  await mkdir(USERNS_DIR, { recursive: true, mode: 0o700 });
  if (await isNamespaceFile(file)) await run(['umount', '--lazy', file]); // a leftover
  await writeFile(file, '', { mode: 0o444 });
  await run(['mount', '--bind', `/proc/${pid}/ns/user`, file]);
}

/**
 * Makes user namespace `name` (mapped as above) and a network namespace it owns, both
 * kept as files; returns the user namespace's file. Idempotent: existing ones are kept.
 * The network's fresh path (network.ts) does the same steps itself, the netns attach in
 * the batch that makes its veth.
 */
export async function createMachineNamespaces(name: string): Promise<string> {
  const userns = usernsFile(name);
  const netns = path.join(NETNS_DIR, name);
  if ((await isNamespaceFile(userns)) && (await isNamespaceFile(netns))) return userns;
  await releaseMachineNamespaces(name);
  const holder = await spawnNamespaceHolder();
  try {
    await Promise.all([
      keepUserns(name, holder.pid),
      run(['ip', 'netns', 'attach', name, String(holder.pid)]),
    ]);
    return userns;
  } catch (err) {
    await releaseMachineNamespaces(name);
    throw err;
  } finally {
    holder.release();
  }
}

/** Removes what `createMachineNamespaces(name)` made; missing parts are fine. */
export async function releaseMachineNamespaces(name: string): Promise<void> {
  for (const file of [path.join(NETNS_DIR, name), usernsFile(name)]) {
    if (await isNamespaceFile(file)) await run(['umount', '--lazy', file]);
    await rm(file, { force: true });
  }
}

/**
 * Directories already found searchable by the machines' range, so that each start does
 * not stat every ancestor again (a chain is added only once all of it was checked).
 */
const traversable = new Set<string>();

/**
 * Lets the machines' range pass through every directory above `target` (adds o+x where
 * missing, never read): runc binds a machine's root and volumes from inside its user
 * namespace, as host uid 200000, so each directory on the way must let that uid search
 * it. A data directory under a 0700 home is the usual case. Each directory is looked at
 * once per process: one an operator closes again later fails the next start loudly
 * (runc cannot reach the root), and the next pier start opens it again.
 */
export async function ensureTraversable(target: string): Promise<void> {
  const checked: string[] = [];
  for (let dir = path.dirname(path.resolve(target)); ; dir = path.dirname(dir)) {
    if (traversable.has(dir)) break;
    const st = await stat(dir);
    if ((st.mode & 0o001) === 0) await chmod(dir, (st.mode & 0o7777) | 0o001);
    checked.push(dir);
    if (dir === '/') break;
  }
  for (const dir of checked) traversable.add(dir);
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
