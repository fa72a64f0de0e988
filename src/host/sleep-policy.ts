/**
 * The sleep policy as a pure decision (spec 2.4): given a database's policy, its size,
 * how long it has been idle and what it is doing now, what should happen next. Kept apart
 * from the timers and processes so the rule itself is tested on its own.
 */
/** When an idle database sleeps (spec 2.4); stored as the `suspend_policy` of its row. */
export interface SuspendPolicy {
  mode: 'suspend' | 'stop' | 'off';
  idleSeconds: number;
  stopAfterSeconds?: number;
}

export type Power = 'running' | 'suspended' | 'stopped';
export type SleepAction = 'none' | 'suspend' | 'stop';

/** Above this a suspended database would pin too much memory: it is stopped instead. */
export const SUSPEND_MAX_MEMORY_MB = 2048;

export interface SleepInput {
  policy: SuspendPolicy | null;
  memoryMb: number;
  power: Power;
  idleMs: number;
  /** Whether this host can freeze processes (cgroup freezer); without it, sleep stops. */
  canFreeze: boolean;
}

export function sleepAction(s: SleepInput): SleepAction {
  const p = s.policy;
  if (!p || p.mode === 'off' || s.power === 'stopped') return 'none';
  if (s.power === 'running') {
    if (s.idleMs < p.idleSeconds * 1000) return 'none';
    const freeze = p.mode === 'suspend' && s.memoryMb <= SUSPEND_MAX_MEMORY_MB && s.canFreeze;
    return freeze ? 'suspend' : 'stop';
  }
  // Suspended: stopAfterSeconds counts from the last activity, as the spec says.
  if (p.stopAfterSeconds !== undefined && s.idleMs >= p.stopAfterSeconds * 1000) return 'stop';
  return 'none';
}
