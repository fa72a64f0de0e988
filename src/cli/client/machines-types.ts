/**
 * The shapes of the machine answers the client reads: the API's own records
 * (src/contracts/machines.ts; spec 2.11, 2.12, 4.9; docs/api.md), so the client cannot
 * drift from the server. Types only, but for the list of states, which is data.
 */

/** The states `pier machines wait --state` accepts (the route's own list). */
export { MACHINE_STATES } from '../../contracts/machines.js';

export type { AppLogs, LogEntry, Machine, MachineState } from '../../contracts/machines.js';
