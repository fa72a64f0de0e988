/**
 * The OCI runtimes a machine can run under, chosen by the operator (PIER_MACHINE_RUNTIME):
 *
 * - `runc` (default): the machine's processes are host processes in their own namespaces,
 *   under the seccomp allowlist; the host kernel serves their system calls.
 * - `runsc` (gVisor): the machine's processes run on gVisor's own kernel (the Sentry, a
 *   user-space process), which serves their system calls; the Sentry itself reaches the
 *   host kernel only through a small seccomp filter of its own. Stronger against a kernel
 *   bug, dearer per system call. Its platform is ptrace (no /dev/kvm needed), and its
 *   network stack (netstack) runs inside the sandbox, on the veth of the machine's network
 *   namespace given in the configuration (`--network=sandbox`), so the bridge, the walls
 *   and the addresses pier sets up apply unchanged.
 *
 * Both take the same bundle and the same verbs (`run --pid-file`, `exec`, `kill`,
 * `delete --force`); what differs is here.
 */

/** The runtimes an operator can choose. */
export const MACHINE_RUNTIMES = ['runc', 'runsc'] as const;
export type MachineRuntimeName = (typeof MACHINE_RUNTIMES)[number];

/**
 * Global flags of `runsc`, after `--root`:
 * - `--platform=ptrace`: works on any host (kvm needs /dev/kvm, which pier never assumes);
 * - `--network=sandbox`: gVisor's own network stack (netstack) on the interfaces of the
 *   configuration's netns (the sandbox takes the veth's address over: the host kernel no
 *   longer answers on it);
 * - `--file-access=exclusive`: the root is the machine's alone while it runs, which lets
 *   gVisor cache it;
 * - `--overlay2=none`: the root already is pier's overlay; writes must reach its upper
 *   layer (the machine's volume), not a memory-backed layer of gVisor's;
 * - `--oci-seccomp`: the configuration's seccomp allowlist applies inside the sandbox too
 *   (gVisor enforces it itself; without the flag it ignores it).
 */
const RUNSC_FLAGS = [
  '--platform=ptrace',
  '--network=sandbox',
  '--file-access=exclusive',
  '--overlay2=none',
  '--oci-seccomp',
];

/** The start of every command of `runtime` on sandboxes kept in `root`: binary, root, flags. */
export function runtimeCommand(
  runtime: MachineRuntimeName,
  root: string,
  binary?: string,
): string[] {
  const flags = runtime === 'runsc' ? RUNSC_FLAGS : [];
  return [binary ?? runtime, '--root', root, ...flags];
}

/** Whether `value` names a runtime. */
export function isMachineRuntime(value: string): value is MachineRuntimeName {
  return (MACHINE_RUNTIMES as readonly string[]).includes(value);
}

/**
 * The command that runs sandbox `id` from `bundle` in the foreground, writing its pid to
 * `pidFile`; `netns` is the network namespace file its configuration names, if any.
 *
 * runsc (Debian's 2022 build) refuses to scrape a network namespace in which
 * /proc/sys/net/core/rmem_default exists, taking it for the host's; since Linux 6.x every
 * network namespace has that file. So `runsc run` gets a mount namespace of its own where
 * that directory, as the machine's network namespace shows it (mounted from inside that
 * namespace: /proc/sys/net entries are per namespace), is hidden under an empty tmpfs.
 * Nothing of this reaches the host's mounts, and runsc itself stays in the host's network
 * namespace, where `runsc exec` and `kill` find its control socket (an abstract socket,
 * so per network namespace). That /proc is then no longer fully visible, and the kernel
 * lets a user namespace (the gofer's) mount a procfs only where one is; so an untouched
 * procfs is mounted first at `procDir` (an empty directory in the bundle), in that
 * private mount namespace too. A machine without a network namespace gets
 * `--network=none`: loopback only, as runc's fresh namespace has.
 */
export function runArgv(
  runtime: MachineRuntimeName,
  command: string[],
  opts: { id: string; bundle: string; pidFile: string; procDir: string; netns?: string },
): string[] {
  const run = ['run', '--bundle', opts.bundle, '--pid-file', opts.pidFile, opts.id];
  if (runtime === 'runc') return [...command, ...run];
  if (opts.netns === undefined) {
    return [...command.map((a) => (a === '--network=sandbox' ? '--network=none' : a)), ...run];
  }
  // A constant script; everything it runs arrives as arguments ("$@"), never as text.
  const hide = [
    'mount -t proc -o nosuid,nodev,noexec proc "$1"',
    'nsenter --net="$2" mount -t tmpfs -o ro,size=4k,mode=555 pier-hide /proc/sys/net/core',
    'shift 2',
    'exec "$@"',
  ].join(' && ');
  return [
    'unshare',
    '--mount',
    '--propagation',
    'private',
    '--',
    'sh',
    '-c',
    hide,
    'sh',
    opts.procDir,
    opts.netns,
    ...command,
    ...run,
  ];
}
