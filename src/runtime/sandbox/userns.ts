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
  readFile,
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
 * (`keepUserns`, `ip netns attach`). The process is `ip -batch -`, so the commands that
 * set up the inside of the network namespace (`send`) run there without a spawn of
 * their own: it holds CAP_NET_ADMIN over that namespace, through its user namespace.
 */
export interface NamespaceHolder {
  pid: number;
  /** Runs `ip` commands (`addr add …`) inside the namespaces, in order, as they arrive. */
  send(commands: string[]): void;
  /** Ends the holder once the commands sent ran; rejects with ip's words if one failed. */
  finish(): Promise<void>;
  /** Lets it exit, whatever the commands did (the namespaces go unless kept as files). */
  release(): void;
  /** Whether it has exited (a holder kept ready may have been killed meanwhile). */
  readonly exited: boolean;
}

/** How often, and how long, the holder is looked at until it runs in its namespaces. */
const HOLDER_POLL_MS = 1;
const HOLDER_TIMEOUT_MS = 5_000;

/**
 * Starts a holder: `unshare --user --net --keep-caps -- ip -batch -` (argument arrays;
 * `--keep-caps` keeps the capabilities unshare has in the new user namespace across the
 * exec, which an unmapped uid would lose otherwise). Once
 * `/proc/<pid>/comm` names `ip`, unshare has made both namespaces and exec'd (same pid);
 * the maps are then written from here, as host root. A holder is not waited for by the
 * event loop (`unref`): one kept ready must not keep a finished process alive, and it
 * ends with pier anyway (its stdin closes).
 */
export async function spawnNamespaceHolder(): Promise<NamespaceHolder> {
  const child = spawn('unshare', ['--user', '--net', '--keep-caps', '--', 'ip', '-batch', '-'], {
    stdio: ['pipe', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr?.setEncoding('utf8').on('data', (d: string) => (stderr = (stderr + d).slice(-4096)));
  const ended = new Promise<number | null>((resolve) => {
    child.once('exit', (code) => resolve(code));
    child.once('error', () => resolve(null));
  });
  let exited = false;
  void ended.then(() => (exited = true));
  child.stdin?.on('error', () => {}); // EPIPE once it is gone: seen through `finish`
  child.unref();
  for (const stream of [child.stdin, child.stderr])
    (stream as { unref?(): void } | null)?.unref?.();
  const release = () => {
    child.stdin?.end();
  };
  const holder: NamespaceHolder = {
    pid: child.pid ?? 0,
    send: (commands) => void child.stdin?.write(commands.map((c) => `${c}\n`).join('')),
    finish: async () => {
      release();
      const code = await ended;
      if (code !== 0) throw new Error(`ip in the machine's namespaces failed: ${stderr.trim()}`);
    },
    release,
    get exited() {
      return exited;
    },
  };
  try {
    const deadline = Date.now() + HOLDER_TIMEOUT_MS;
    while ((await readFile(`/proc/${holder.pid}/comm`, 'utf8').catch(() => '')) !== 'ip\n') {
      if (exited || holder.pid === 0)
        throw new Error(`unshare ended before it unshared: ${stderr.trim()}`);
      if (Date.now() > deadline)
        throw new Error(`unshare did not make its namespaces in ${HOLDER_TIMEOUT_MS} ms`);
      await new Promise((r) => setTimeout(r, HOLDER_POLL_MS));
    }
    await writeFile(`/proc/${holder.pid}/uid_map`, ID_MAP);
    await writeFile(`/proc/${holder.pid}/gid_map`, ID_MAP);
    return holder;
  } catch (err) {
    release();
    if (!exited) child.kill('SIGKILL');
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
