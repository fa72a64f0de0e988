/**
 * Runs Debian's `buildah` for one build, as isolated as a machine:
 *
 * - buildah itself runs in a network namespace of its own with nothing in it (`unshare
 *   --net`): it can reach no registry (pier hands it base images as local layouts, see
 *   dockerfile-bases.ts), and whatever network setup it attempts lands in that empty
 *   namespace, never on the host's firewall.
 * - every RUN step is an OCI container (`--isolation oci`, runc) in the user namespace
 *   machines use (ids 0–65535 are host 200000–265535, so build root is no one on the
 *   host), under pier's seccomp profile, with buildah's default capabilities inside that
 *   namespace only, and cgroup caps on memory, CPU and processes (on the build's group,
 *   over all its RUN steps).
 * - its network is the namespace the machines runtime lent the build
 *   (local/build-networks.ts: an address on the machines' bridge, behind their walls),
 *   joined by path (`--network ns:`): runc enters it as host root before it makes the
 *   step's user namespace, and buildah configures no network (no netavark, no firewall
 *   rule, no route on the host). Names resolve through the machines' resolver (`--dns`).
 *   The step's user namespace does not own that network namespace, so the step cannot
 *   change its addresses or routes, and cannot mount a sysfs (the kernel lets only the
 *   namespace's owner): an empty read-only tree stands in for /sys (with the cgroup
 *   mount buildah puts on /sys/fs/cgroup). Without a lender (no machines runtime) a step
 *   has `--network none`: its own loopback only.
 * - the whole process group is killed at the time cap (and the caller kills what is
 *   left in the build's cgroup: RUN containers are not in buildah's process group).
 *
 * Output (both streams) goes to the build's log file, as the builder prints it.
 */
import { spawn } from 'node:child_process';
import type { WriteStream } from 'node:fs';
import { GUEST_ID_BASE, GUEST_ID_COUNT } from '../sandbox/userns.js';

/** Where one app's builder keeps its layers (the per-app cache). */
export interface BuildahStorage {
  root: string;
  runroot: string;
}

/** The caps of one build (operator settings). */
export interface BuildLimits {
  timeoutS: number;
  memoryMb: number;
  cpus: number;
  pids: number;
  diskGb: number;
}

/** The end of one buildah run. */
export interface BuildahExit {
  code: number | null;
  signal: NodeJS.Signals | null;
  timedOut: boolean;
}

const ID_MAP = `0:${GUEST_ID_BASE}:${GUEST_ID_COUNT}`;

/** The buildah arguments common to every command (storage of the app's cache). */
function storageArgs(s: BuildahStorage): string[] {
  return ['--storage-driver', 'vfs', '--root', s.root, '--runroot', s.runroot];
}

/** `buildah bud` for the context and Dockerfile, tagged `tag`. */
export function budArgs(opts: {
  storage: BuildahStorage;
  dockerfile: string;
  context: string;
  tag: string;
  secrets: { id: string; file: string }[];
  seccompFile: string;
  /** The build's cgroup (CgroupSet.path): every RUN container is made inside it. */
  cgroupParent: string;
  /** runc's state directory for the RUN containers (the build's own). */
  runcRoot: string;
  /** Where buildah writes the built image's id. */
  iidFile: string;
  limits: BuildLimits;
  /** The network lent to the RUN steps, and the empty tree that stands in for their /sys. */
  network?: { netnsPath: string; dns?: string; emptySys: string };
}): string[] {
  const { limits, network } = opts;
  const period = 100_000;
  const networkArgs = network
    ? [
        '--network',
        `ns:${network.netnsPath}`,
        '--dns',
        network.dns ?? 'none',
        '--volume',
        `${network.emptySys}:/sys:ro`,
      ]
    : ['--network', 'none'];
  return [
    ...storageArgs(opts.storage),
    'bud',
    '--isolation',
    'oci',
    // runc keeps the RUN containers' state in a directory of the build's own, not in the
    // host's /run/runc (removed with the build, even after a kill at the time cap).
    '--runtime-flag',
    `root=${opts.runcRoot}`,
    ...networkArgs,
    '--userns-uid-map',
    ID_MAP,
    '--userns-gid-map',
    ID_MAP,
    '--pull-never',
    '--layers',
    '--security-opt',
    `seccomp=${opts.seccompFile}`,
    '--cpu-period',
    String(period),
    '--cpu-quota',
    String(Math.max(1000, Math.round(limits.cpus * period))),
    // buildah 1.28 has no --pids-limit: the build's cgroup caps processes and memory for
    // all its RUN containers together (no --memory here: a cap of the container's own
    // would be hit first, and its counters go with the container, see cap-events.ts).
    '--cgroup-parent',
    opts.cgroupParent,
    ...opts.secrets.flatMap((s) => ['--secret', `id=${s.id},src=${s.file}`]),
    '--iidfile',
    opts.iidFile,
    '-f',
    opts.dockerfile,
    '-t',
    opts.tag,
    opts.context,
  ];
}

/** `buildah push` of `tag` into an OCI layout at `dir`. */
export function pushArgs(storage: BuildahStorage, tag: string, dir: string): string[] {
  return [...storageArgs(storage), 'push', '--quiet', tag, `oci:${dir}`];
}

/**
 * `buildah rmi` of an image by its id: the image with the intermediate images under it
 * that no other image stands on (so the layers a newer build shares with it stay).
 */
export function rmiArgs(storage: BuildahStorage, id: string): string[] {
  return [...storageArgs(storage), 'rmi', id];
}

/**
 * `buildah rm --all`: the working containers left in the app's storage by a build that
 * died with `pier serve` (a finished or failed `bud` removes its own).
 */
export function rmAllArgs(storage: BuildahStorage): string[] {
  return [...storageArgs(storage), 'rm', '--all'];
}

/** Where and how long one buildah command runs. */
export interface BuildahRun {
  /** Its output is appended here. */
  log: WriteStream;
  /** Its whole process group is killed at this moment (ms since the epoch)… */
  deadline: number;
  /** …or on this signal. */
  signal?: AbortSignal;
  /** Called at the time cap or abort, after the process group is killed. */
  onKill?: () => void;
  /**
   * The build's own scratch directory: buildah's RUN bundles (TMPDIR) go there instead
   * of `/var/tmp`, so a build killed at its cap leaves none behind once it is removed.
   */
  scratch: string;
}

/**
 * Runs buildah with `args` in an empty network namespace (see BuildahRun for the rest).
 */
export function runBuildah(args: string[], run: BuildahRun): Promise<BuildahExit> {
  const { log, deadline, signal, onKill, scratch } = run;
  return new Promise((resolve, reject) => {
    const child = spawn('unshare', ['--net', '--', 'buildah', ...args], {
      detached: true, // its own process group, killed whole at the cap
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin', HOME: '/root', TMPDIR: scratch },
    });
    let timedOut = false;
    const killAll = () => {
      try {
        if (child.pid) process.kill(-child.pid, 'SIGKILL');
      } catch {
        // already gone
      }
      onKill?.();
    };
    const timer = setTimeout(
      () => {
        timedOut = true;
        killAll();
      },
      Math.max(0, deadline - Date.now()),
    );
    const onAbort = () => killAll();
    signal?.addEventListener('abort', onAbort, { once: true });
    child.stdout.on('data', (c: Buffer) => log.write(c));
    child.stderr.on('data', (c: Buffer) => log.write(c));
    child.once('error', (err) => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      reject(err);
    });
    child.once('close', (code, sig) => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      resolve({ code, signal: sig, timedOut });
    });
  });
}
