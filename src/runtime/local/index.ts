/**
 * The local runtime: machines on this host (see README.md). `LocalRuntime` implements
 * `MachineRuntime` from ../runtime.ts.
 */
export {
  LocalRuntime,
  volumeName,
  type LocalRuntimeOptions,
  type RuntimeLog,
} from './local-runtime.js';
export { assertMachineId } from './records.js';
export type { WallsOptions } from './walls.js';
