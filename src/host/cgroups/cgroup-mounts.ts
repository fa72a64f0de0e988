/**
 * Where the cgroup hierarchies are mounted and where this process sits in them, read
 * from /proc (never assumed from /sys/fs/cgroup's usual layout: distributions co-mount
 * v1 controllers as `cpu,cpuacct`, containers mount a sub-tree, hybrid hosts add a
 * controller-less cgroup2 at `/sys/fs/cgroup/unified`).
 */

/** The v1 controllers pier uses; the freezer is the one it cannot do without. */
export const V1_CONTROLLERS = ['freezer', 'memory', 'cpu', 'pids'] as const;
export type V1Controller = (typeof V1_CONTROLLERS)[number];

/** One mounted hierarchy: where it is mounted and which of its cgroups is the mount's root. */
export interface Mount {
  mountPoint: string;
  /** The cgroup path shown at `mountPoint` (`/` unless a container mounts a sub-tree). */
  root: string;
}

export interface CgroupMounts {
  v1: Map<V1Controller, Mount>;
  v2: Mount | undefined;
}

/** Undoes the octal escapes (`\040` for a space…) the kernel writes in mountinfo paths. */
function unescape(field: string): string {
  return field.replace(/\\([0-7]{3})/g, (_, oct: string) => String.fromCharCode(parseInt(oct, 8)));
}

/**
 * Parses /proc/self/mountinfo: `id parent major:minor root mountpoint opts [tags] - fstype
 * source superopts`. For v1 the controllers are in the super options.
 */
export function parseMountinfo(text: string): CgroupMounts {
  const out: CgroupMounts = { v1: new Map(), v2: undefined };
  for (const line of text.split('\n')) {
    const dash = line.indexOf(' - ');
    if (dash < 0) continue;
    const left = line.slice(0, dash).split(' ');
    const [fstype, , superOpts = ''] = line.slice(dash + 3).split(' ');
    const root = left[3];
    const mountPoint = left[4];
    if (root === undefined || mountPoint === undefined) continue;
    const mount = { mountPoint: unescape(mountPoint), root: unescape(root) };
    if (fstype === 'cgroup2') {
      out.v2 ??= mount;
    } else if (fstype === 'cgroup') {
      const opts = superOpts.split(',');
      for (const c of V1_CONTROLLERS) if (opts.includes(c) && !out.v1.has(c)) out.v1.set(c, mount);
    }
  }
  return out;
}

export interface ProcCgroups {
  v1: Map<V1Controller, string>;
  v2: string | undefined;
}

/** Parses /proc/<pid>/cgroup: `id:controllers:path` (v1) and `0::path` (v2). */
export function parseProcCgroup(text: string): ProcCgroups {
  const out: ProcCgroups = { v1: new Map(), v2: undefined };
  for (const line of text.split('\n')) {
    const first = line.indexOf(':');
    const second = line.indexOf(':', first + 1);
    if (first < 0 || second < 0) continue;
    const controllers = line.slice(first + 1, second);
    const cgPath = line.slice(second + 1);
    if (line.slice(0, first) === '0' && controllers === '') out.v2 = cgPath;
    else for (const c of controllers.split(',')) if (isV1(c)) out.v1.set(c, cgPath);
  }
  return out;
}

function isV1(c: string): c is V1Controller {
  return (V1_CONTROLLERS as readonly string[]).includes(c);
}

/**
 * The directory of cgroup `cgPath` (as /proc shows it) in a mounted hierarchy. A path
 * outside the mount's sub-tree cannot be reached from here: undefined.
 */
export function dirOf(mount: Mount, cgPath: string): string | undefined {
  const root = mount.root === '/' ? '' : mount.root;
  if (root && cgPath !== root && !cgPath.startsWith(`${root}/`)) return undefined;
  const rel = cgPath.slice(root.length).replace(/^\/+/, '');
  return rel ? `${mount.mountPoint}/${rel}` : mount.mountPoint;
}
