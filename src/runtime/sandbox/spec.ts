/**
 * What a sandbox is made of, and the bwrap command line that makes it. Pure: no I/O, so
 * every flag is tested without starting anything.
 *
 * The sandbox gets fresh mount, pid, ipc, uts and cgroup namespaces and a user namespace
 * that maps every uid and gid to itself. The identity map keeps file ownership exactly as
 * on the host (an image's `nginx` user owns its files, inside and out), while the
 * capabilities a machine's root holds count only inside that namespace: it cannot touch
 * the host's network configuration, load modules, mount outside its own namespace or
 * create devices. Its root keeps Docker's default capability set (so images that chown,
 * or drop to another user, work); any other uid keeps none. The network namespace is the
 * machine's own (`netns`, entered with nsenter) or, without one, a new one holding only
 * `lo`.
 */
import path from 'node:path';
import { FD } from './protocol.js';
import { assertSandboxId } from './names.js';

/** One machine process to run isolated. */
export interface SandboxSpec {
  /** The machine id: `[a-z0-9][a-z0-9_-]{0,62}`. */
  id: string;
  /** The merged root directory (see rootfs.ts), bound as `/`. */
  rootfs: string;
  /** Network namespace name (from Network.createNetns); absent: a private one with `lo` only. */
  netns?: string;
  hostname: string;
  /** The process and its arguments; argv[0] is looked up on the PATH given in `env`. */
  argv: string[];
  /** The whole environment; nothing of pier's leaks in. */
  env: Record<string, string>;
  /** Working directory inside the sandbox. */
  cwd: string;
  uid: number;
  gid: number;
  /** Host directories bound into the sandbox (targets are paths inside it). */
  mounts: { source: string; target: string; readOnly: boolean }[];
  /** Name of the group in the CgroupSet, made beforehand with the machine's limits. */
  cgroup: string;
  /** Where the log, the fifos and the exit status live; outside the rootfs. */
  stateDir: string;
  /** Cap on the console log on disk (both segments), at least 4096. */
  logMaxBytes: number;
}

/** The capabilities a machine's root keeps: Docker's default set, all scoped to its user namespace. */
export const ROOT_CAPS = [
  'CAP_CHOWN',
  'CAP_DAC_OVERRIDE',
  'CAP_FOWNER',
  'CAP_FSETID',
  'CAP_KILL',
  'CAP_SETGID',
  'CAP_SETUID',
  'CAP_SETPCAP',
  'CAP_NET_BIND_SERVICE',
  'CAP_NET_RAW',
  'CAP_SYS_CHROOT',
  'CAP_MKNOD',
  'CAP_AUDIT_WRITE',
  'CAP_SETFCAP',
] as const;

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_.-]*$/;
const NETNS = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,200}$/;
const HOSTNAME =
  /^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/;

/** Throws with every problem of `spec` that would make bwrap fail or misbehave. */
export function checkSpec(spec: SandboxSpec): void {
  assertSandboxId(spec.id);
  const problems: string[] = [];
  const abs = (p: string, what: string) => {
    if (!path.isAbsolute(p)) problems.push(`${what} must be absolute: ${JSON.stringify(p)}`);
  };
  const noNul = (s: string, what: string) => {
    if (s.includes('\0')) problems.push(`${what} holds a NUL byte`);
  };
  abs(spec.rootfs, 'rootfs');
  abs(spec.stateDir, 'stateDir');
  abs(spec.cwd, 'cwd');
  if (spec.netns !== undefined && !NETNS.test(spec.netns))
    problems.push(`invalid netns ${spec.netns}`);
  if (!HOSTNAME.test(spec.hostname) || spec.hostname.length > 64) {
    problems.push(`invalid hostname ${JSON.stringify(spec.hostname)}`);
  }
  if (spec.argv.length === 0 || spec.argv[0] === '') problems.push('argv is empty');
  spec.argv.forEach((a, i) => noNul(a, `argv[${i}]`));
  for (const [k, v] of Object.entries(spec.env)) {
    if (!ENV_NAME.test(k)) problems.push(`invalid environment name ${JSON.stringify(k)}`);
    noNul(v, `env ${k}`);
  }
  for (const [what, id] of [
    ['uid', spec.uid],
    ['gid', spec.gid],
  ] as const) {
    if (!Number.isInteger(id) || id < 0 || id > 4294967294) problems.push(`invalid ${what} ${id}`);
  }
  for (const m of spec.mounts) {
    abs(m.source, 'mount source');
    abs(m.target, 'mount target');
    noNul(m.source + m.target, 'mount');
  }
  if (!Number.isSafeInteger(spec.logMaxBytes) || spec.logMaxBytes < 4096) {
    problems.push(`logMaxBytes must be an integer ≥ 4096: ${spec.logMaxBytes}`);
  }
  if (problems.length > 0) throw new Error(`invalid sandbox spec: ${problems.join('; ')}`);
}

/**
 * /proc entries covered as Docker covers them. They matter because the machine's root is
 * the host's uid 0 (the identity map): the kernel lets uid 0 write sysctls by file mode
 * alone, without any capability, so a writable /proc/sys would let it set
 * `kernel.core_pattern` for the whole host. bwrap's own covering misses /proc/sys for a
 * root whose uid is mapped (its access() probe gets EACCES on that directory).
 */
export const PROC_READ_ONLY = ['sys', 'sysrq-trigger', 'fs', 'bus', 'irq'] as const;
/** /proc entries hidden altogether (what the kernel exposes of the host's hardware and keys). */
export const PROC_MASKED = [
  'kcore',
  'keys',
  'latency_stats',
  'timer_list',
  'timer_stats',
  'sched_debug',
  'acpi',
  'asound',
  'scsi',
] as const;

/**
 * Where things go inside the root: mount targets resolved in it (see resolveInRoot), in
 * spec order, and which of the /proc entries above this kernel has.
 */
export interface ResolvedTargets {
  proc: string;
  dev: string;
  tmp: string;
  mounts: string[];
  /** Entries of PROC_READ_ONLY present on this host. */
  procReadOnly?: string[];
  /** Entries of PROC_MASKED present on this host, files and directories apart. */
  procMasked?: { files: string[]; dirs: string[] };
  /** An empty, read-only host directory to lay over masked directories. */
  emptyDir?: string;
}

/**
 * bwrap's options for `spec`, handed over on fd 5 (`--args`) so that neither the
 * environment nor host paths show in any process's command line, inside or out.
 */
export function bwrapOptions(spec: SandboxSpec, targets: ResolvedTargets): string[] {
  const args: string[] = [
    '--unshare-user',
    // The keeper writes the identity uid/gid maps while bwrap waits on this fd.
    '--userns-block-fd',
    String(FD.usernsBlock),
    '--info-fd',
    String(FD.info),
    '--unshare-pid',
    '--unshare-ipc',
    '--unshare-uts',
    '--unshare-cgroup-try',
    ...(spec.netns === undefined ? ['--unshare-net'] : []),
    '--hostname',
    spec.hostname,
    '--bind',
    spec.rootfs,
    '/',
    '--proc',
    targets.proc,
    ...procCover(targets),
    '--dev',
    targets.dev,
    // World-writable with the sticky bit, as an image's own /tmp would be.
    '--perms',
    '1777',
    '--tmpfs',
    targets.tmp,
  ];
  spec.mounts.forEach((m, i) => {
    args.push(m.readOnly ? '--ro-bind' : '--bind', m.source, targets.mounts[i] as string);
  });
  args.push('--cap-drop', 'ALL');
  if (spec.uid === 0) for (const cap of ROOT_CAPS) args.push('--cap-add', cap);
  args.push('--chdir', spec.cwd, '--new-session', '--clearenv');
  for (const [k, v] of Object.entries(spec.env)) args.push('--setenv', k, v);
  return args;
}

/** Binds that make PROC_READ_ONLY read-only and hide PROC_MASKED (sources are the host's). */
function procCover(t: ResolvedTargets): string[] {
  const args: string[] = [];
  for (const p of t.procReadOnly ?? []) args.push('--ro-bind', `/proc/${p}`, `${t.proc}/${p}`);
  for (const f of t.procMasked?.files ?? []) args.push('--ro-bind', '/dev/null', `${t.proc}/${f}`);
  for (const d of t.procMasked?.dirs ?? []) {
    if (!t.emptyDir) throw new Error('masking /proc directories needs an empty directory');
    args.push('--ro-bind', t.emptyDir, `${t.proc}/${d}`);
  }
  return args;
}

/**
 * The command the keeper spawns: into the machine's network namespace (nsenter, while
 * still root), down to the machine's uid and gid (setpriv: bwrap and everything it starts
 * then are that user on the host too, with capabilities only inside the sandbox's user
 * namespace), then bwrap reading its options from fd 5.
 */
export function commandLine(spec: SandboxSpec, bwrap = 'bwrap'): string[] {
  const cmd: string[] = [];
  if (spec.netns !== undefined) cmd.push('nsenter', `--net=/run/netns/${spec.netns}`, '--');
  if (spec.uid !== 0 || spec.gid !== 0) {
    cmd.push('setpriv', `--reuid=${spec.uid}`, `--regid=${spec.gid}`, '--clear-groups', '--');
  }
  cmd.push(bwrap, '--args', String(FD.args), '--', ...spec.argv);
  return cmd;
}
