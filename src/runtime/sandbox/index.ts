/**
 * Running one machine's process isolated: the platform network (bridge, per-machine
 * and user namespaces), the overlay root, and the sandbox itself (runc, in fresh
 * namespaces and the machine's cgroup, with a keeper holding its console log and exit
 * status).
 * See README.md in this directory for the design, the log format and the limits.
 */
export { allocateIp, gatewayOf, isMachineIp, parseCidr } from './cidr.js';
export { assertSandboxId, netnsName, vethName } from './names.js';
export { Network, type MachineNet, type NetworkOptions } from './network.js';
export { together } from './together.js';
export { applyWalls, removeWalls, sweepWalls } from './walls.js';
export { sweepNetworkPolicies } from './network-policy.js';
export { listensOn } from './listeners.js';
export { wallsRuleset, type WallsMachine, type WallsPlan } from './walls-ruleset.js';
export {
  mountRootfs,
  mountedType,
  resolveInRoot,
  unmountRootfs,
  type RootfsSpec,
} from './rootfs.js';
export { ROOT_CAPS, checkSpec, type SandboxSpec } from './spec.js';
export { GUEST_ID_BASE, GUEST_ID_COUNT, guestId, hostId } from './userns.js';
export { sandboxRuntimeDir, Sandboxes, type SandboxesOptions, type StopOptions } from './run.js';
export { MACHINE_RUNTIMES, type MachineRuntimeName } from './runtimes.js';
export type { ExitStatus, SandboxRecord } from './protocol.js';
export { cpuTicks, isRunning, type ProcRef } from './proc.js';
export {
  LOG_SEGMENTS,
  MIN_LOG_BYTES,
  readLogs,
  type LogCursor,
  type LogEntry,
  type LogPage,
  type LogStream,
  type ReadLogsOptions,
} from './logs.js';
