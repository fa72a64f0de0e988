/**
 * What a sandbox is made of, checked before anything starts. oci-config.ts turns it into
 * the OCI runtime configuration that runc runs.
 */
import path from 'node:path';
import { assertSandboxId } from './names.js';
import { GUEST_ID_COUNT } from './userns.js';

/** One machine process to run isolated. */
export interface SandboxSpec {
  /** The machine id: `[a-z0-9][a-z0-9_-]{0,62}`. */
  id: string;
  /** The merged root directory (see rootfs.ts), bound as `/`. */
  rootfs: string;
  /** Network namespace name (from Network.createNetns); absent: a private one with `lo` only. */
  netns?: string;
  /**
   * The user namespace that owns `netns` (MachineNet.userns); required with it. Absent:
   * runc makes a new one with the same mapping.
   */
  userns?: string;
  hostname: string;
  /** The process and its arguments; argv[0] is looked up on the PATH given in `env`. */
  argv: string[];
  /** The whole environment; nothing of pier's leaks in. */
  env: Record<string, string>;
  /** Working directory inside the sandbox. */
  cwd: string;
  /** The process's uid and gid inside the machine (0–65535; see userns.ts). */
  uid: number;
  gid: number;
  /** Supplementary groups inside the machine (0–65535); sessions get them too. */
  groups?: number[];
  /** Host directories bound into the sandbox (targets are paths inside it). */
  mounts: { source: string; target: string; readOnly: boolean }[];
  /** Name of the group in the CgroupSet, made beforehand with the machine's limits. */
  cgroup: string;
  /** Where the log, the fifos and the exit status live; outside the rootfs. */
  stateDir: string;
  /** Cap on the console log on disk (both segments), at least 4096. */
  logMaxBytes: number;
}

/**
 * The capabilities a machine's root keeps: Docker's default set (images that chown, or
 * drop to another user, need them), each scoped to the machine's user namespace; any
 * other uid keeps none.
 */
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

/** Throws with every problem of `spec` that would make the runtime fail or misbehave. */
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
  if (spec.netns !== undefined && spec.userns === undefined)
    problems.push('a netns needs the userns that owns it');
  if (spec.userns !== undefined) abs(spec.userns, 'userns');
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
    if (!Number.isInteger(id) || id < 0 || id >= GUEST_ID_COUNT) {
      problems.push(`invalid ${what} ${id}: a machine's ids run 0–${GUEST_ID_COUNT - 1}`);
    }
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
