/**
 * Machine states (spec 2.11) and what each action may do from each of them, as data. The
 * spec names the states and the actions but not the transitions; these are ours, in the
 * manner of Fly.io's machines: an action on a machine already where it leads is a no-op,
 * an action while another is under way is 409 `machine-busy`, and destroy always wins.
 */
import type { MachineAction, MachineState } from '../../contracts/machines.js';

export type { MachineAction, MachineState };

/** States in which an operation is under way. */
export const TRANSITIONAL: ReadonlySet<MachineState> = new Set([
  'requested',
  'scheduled',
  'starting',
  'suspending',
  'stopping',
]);

/** The state an action leads to once done. */
export const TARGET: Record<MachineAction, MachineState> = {
  start: 'running',
  stop: 'stopped',
  suspend: 'suspended',
  destroy: 'deleted',
};

/** The state shown while the action is under way. */
export const VIA: Record<MachineAction, MachineState> = {
  start: 'starting',
  stop: 'stopping',
  suspend: 'suspending',
  destroy: 'stopping',
};

export type Verdict =
  | { kind: 'go' }
  | { kind: 'noop' }
  | { kind: 'busy'; reason: string }
  | { kind: 'conflict'; reason: string }
  | { kind: 'gone' };

/** What `action` does to a machine that is `observed` now. */
export function judge(action: MachineAction, observed: MachineState): Verdict {
  if (observed === 'deleted') return { kind: 'gone' };
  if (action === 'destroy') return { kind: 'go' };
  if (observed === TARGET[action]) return { kind: 'noop' };
  if (TRANSITIONAL.has(observed)) {
    return { kind: 'busy', reason: `the machine is ${observed}; wait until it is done` };
  }
  if (action === 'suspend' && observed !== 'running') {
    return {
      kind: 'conflict',
      reason: `a ${observed} machine cannot be suspended; start it first`,
    };
  }
  if (action === 'stop' && observed === 'failed') return { kind: 'noop' };
  return { kind: 'go' };
}
