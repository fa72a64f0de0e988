/** The shapes of the machine answers the client reads (spec 2.11, 2.12, 4.9; docs/api.md). */

// The states are the server's own list (one source), imported without its dependencies.
import { MACHINE_STATES, type MachineState } from '../../services/machines/states.js';

/** The states `pier machines wait --state` accepts (the route's own list). */
export { MACHINE_STATES, type MachineState };

/** A machine record (spec 2.11); `config` is the create body with its defaults filled in. */
export interface Machine {
  id: string;
  appName: string;
  config: {
    image?: string;
    vcpus?: number;
    memoryMb?: number;
    internalPort?: number;
    [key: string]: unknown;
  };
  desiredState: MachineState;
  observedState: MachineState;
  host?: string;
  privateIp?: string;
  region: string;
  readyAt?: string;
  createError?: string;
  createErrorCode?: string;
  createBootLog?: string;
  createWarning?: string;
  createdAt: string;
  bootMs?: number;
  restarts: number;
}

/** One line of console output. */
export interface LogEntry {
  machineId: string;
  at: string;
  stream: 'stdout' | 'stderr';
  text: string;
}

/** The answer of `GET /v1/apps/:name/logs`. */
export interface AppLogs {
  entries: LogEntry[];
  cursor: string;
  truncated: string[];
}
