/**
 * A sandbox spec as an OCI runtime configuration (runtime-spec 1.0), which runc runs.
 * Pure: no I/O, so every field is tested without starting anything.
 *
 * What a machine gets, and why:
 * - its own pid, ipc, uts, mount and cgroup namespaces, and a user namespace mapping its
 *   ids to the host's 200000–265535 (userns.ts): machine root is never host root;
 * - the network namespace its user namespace owns (or a new one with only `lo`);
 * - Docker's default capabilities for root and none for others, no_new_privs, and the
 *   seccomp allowlist of seccomp.ts, all of which `runc exec` sessions inherit;
 * - runc's standard masked and read-only /proc and /sys paths, plus /proc/kallsyms;
 * - a small init (tini, bound read-only from the host) as pid 1 that reaps orphans and
 *   passes signals on, so the machine's process is pid 2 and keeps default signal
 *   handling (pid 1 ignores SIGTERM unless it installs a handler);
 * - the devices cgroup rules runc adds to a deny-all default (null, zero, tty, ptmx…).
 */
import type { MachineRuntimeName } from './runtimes.js';
import { seccompProfile, type SeccompProfile } from './seccomp.js';
import { ROOT_CAPS, type SandboxSpec } from './spec.js';
import { GUEST_ID_BASE, GUEST_ID_COUNT } from './userns.js';

/** Where the init is bound inside: on /dev's tmpfs, so nothing is written to the machine's disk. */
export const INIT_PATH = '/dev/.pier-init';

/** What the configuration needs besides the spec. */
export interface OciOptions {
  /** The machine's cgroup as /proc names it (CgroupSet.path). */
  cgroupsPath: string;
  /** The host's static init binary (tini-static). */
  initBinary: string;
  /** Node's `process.arch`, for the seccomp architectures (default: this host's). */
  arch?: string;
  /** The OCI runtime that will run it (default runc); see `userNamespace`. */
  runtime?: MachineRuntimeName;
}

interface Mount {
  destination: string;
  type: string;
  source: string;
  options: string[];
}

/** The OCI configuration (the fields pier sets; see the runtime-spec for each). */
export interface OciConfig {
  ociVersion: string;
  process: {
    terminal: boolean;
    user: { uid: number; gid: number; additionalGids: number[] };
    args: string[];
    env: string[];
    cwd: string;
    capabilities: Record<'bounding' | 'effective' | 'permitted', string[]>;
    noNewPrivileges: boolean;
  };
  root: { path: string; readonly: boolean };
  hostname: string;
  mounts: Mount[];
  linux: {
    uidMappings: { containerID: number; hostID: number; size: number }[];
    gidMappings: { containerID: number; hostID: number; size: number }[];
    namespaces: { type: string; path?: string }[];
    cgroupsPath: string;
    resources: { devices: { allow: boolean; access: string }[] };
    maskedPaths: string[];
    readonlyPaths: string[];
    seccomp: SeccompProfile;
    sysctl?: Record<string, string>;
  };
}

/** Hidden altogether: what the kernel exposes of the host's hardware, keys and symbols. */
export const MASKED_PATHS = [
  '/proc/acpi',
  '/proc/asound',
  '/proc/kcore',
  '/proc/kallsyms',
  '/proc/keys',
  '/proc/latency_stats',
  '/proc/timer_list',
  '/proc/timer_stats',
  '/proc/sched_debug',
  '/proc/scsi',
  '/sys/firmware',
];

/** Read-only: the host-wide knobs (sysctls, sysrq, IRQs, buses). */
export const READONLY_PATHS = [
  '/proc/bus',
  '/proc/fs',
  '/proc/irq',
  '/proc/sys',
  '/proc/sysrq-trigger',
];

const IDS = [{ containerID: 0, hostID: GUEST_ID_BASE, size: GUEST_ID_COUNT }];

/**
 * The standard file systems of a Linux container, then the init and the spec's binds.
 * No tmpfs on /tmp: a file system mounted inside the machine belongs to its user
 * namespace, where host root is nobody and cannot create files (EOVERFLOW), which the
 * files API must do; /tmp is the writable layer's, as in Docker (prepare.ts makes it).
 */
function mounts(spec: SandboxSpec, initBinary: string): Mount[] {
  const std: Mount[] = [
    { destination: '/proc', type: 'proc', source: 'proc', options: ['nosuid', 'noexec', 'nodev'] },
    {
      destination: '/dev',
      type: 'tmpfs',
      source: 'tmpfs',
      options: ['nosuid', 'strictatime', 'mode=755', 'size=65536k'],
    },
    {
      destination: '/dev/pts',
      type: 'devpts',
      source: 'devpts',
      options: ['nosuid', 'noexec', 'newinstance', 'ptmxmode=0666', 'mode=0620', 'gid=5'],
    },
    {
      destination: '/dev/shm',
      type: 'tmpfs',
      source: 'shm',
      options: ['nosuid', 'noexec', 'nodev', 'mode=1777', 'size=65536k'],
    },
    {
      destination: '/dev/mqueue',
      type: 'mqueue',
      source: 'mqueue',
      options: ['nosuid', 'noexec', 'nodev'],
    },
    {
      destination: '/sys',
      type: 'sysfs',
      source: 'sysfs',
      options: ['nosuid', 'noexec', 'nodev', 'ro'],
    },
    {
      destination: INIT_PATH,
      type: 'bind',
      source: initBinary,
      options: ['bind', 'ro', 'nosuid', 'nodev'],
    },
  ];
  const binds = spec.mounts.map((m) => ({
    destination: m.target,
    type: 'bind',
    source: m.source,
    options: ['rbind', m.readOnly ? 'ro' : 'rw', 'nosuid', 'nodev'],
  }));
  return [...std, ...binds];
}

/**
 * The machine's user namespace. runc joins the one pier made (which owns the machine's
 * network namespace, so `runc exec` may enter both). runsc cannot join one: its gofer
 * is a multithreaded Go process, which setns(CLONE_NEWUSER) refuses (EINVAL). It gets a
 * new one with the same mapping, in which the gofer (the process that touches the
 * machine's files on the host) runs, so files are still owned by 200000+ on the host;
 * the Sentry itself runs in yet another new user namespace of its own, as host nobody,
 * chrooted to an empty directory. Joining the network namespace by path needs no
 * ownership (runsc runs as host root) and `runsc exec` joins nothing: the Sentry runs it.
 */
function userNamespace(
  spec: SandboxSpec,
  runtime: MachineRuntimeName,
): { type: string; path?: string } {
  if (spec.userns === undefined || runtime === 'runsc') return { type: 'user' };
  return { type: 'user', path: spec.userns };
}

/**
 * Set by runc in the machine's own network namespace before its process runs (and before
 * /proc/sys turns read-only): any user of the machine may bind ports below 1024 and ping,
 * as in Docker. Machine users hold no capability over a namespace pier made, and a web
 * server on port 80 is the common case. Written from inside the machine's user namespace,
 * so the group range is the machine's own (ids beyond its map are refused). Under runsc
 * the machine's network is gVisor's own netstack, which these host knobs do not govern.
 */
const NETWORK_SYSCTLS = {
  'net.ipv4.ip_unprivileged_port_start': '0',
  'net.ipv4.ping_group_range': `0 ${GUEST_ID_COUNT - 1}`,
};

/** The configuration runc runs `spec` with. */
export function ociConfig(spec: SandboxSpec, opts: OciOptions): OciConfig {
  const runtime = opts.runtime ?? 'runc';
  const caps = spec.uid === 0 ? [...ROOT_CAPS] : [];
  return {
    ociVersion: '1.0.2',
    process: {
      terminal: false,
      user: { uid: spec.uid, gid: spec.gid, additionalGids: spec.groups ?? [] },
      args: [INIT_PATH, '--', ...spec.argv],
      env: Object.entries(spec.env).map(([k, v]) => `${k}=${v}`),
      cwd: spec.cwd,
      capabilities: { bounding: [...ROOT_CAPS], effective: caps, permitted: caps },
      noNewPrivileges: true,
    },
    root: { path: spec.rootfs, readonly: false },
    hostname: spec.hostname,
    mounts: mounts(spec, opts.initBinary),
    linux: {
      uidMappings: IDS,
      gidMappings: IDS,
      namespaces: [
        { type: 'pid' },
        { type: 'ipc' },
        { type: 'uts' },
        { type: 'mount' },
        { type: 'cgroup' },
        userNamespace(spec, runtime),
        spec.netns === undefined
          ? { type: 'network' }
          : { type: 'network', path: `/run/netns/${spec.netns}` },
      ],
      cgroupsPath: opts.cgroupsPath,
      resources: { devices: [{ allow: false, access: 'rwm' }] },
      maskedPaths: MASKED_PATHS,
      readonlyPaths: READONLY_PATHS,
      seccomp: seccompProfile(opts.arch),
      ...(runtime === 'runc' ? { sysctl: NETWORK_SYSCTLS } : {}),
    },
  };
}
