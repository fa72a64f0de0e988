import { describe, expect, it } from 'vitest';
import { sleepAction, type SleepInput } from './sleep-policy.js';

const base: SleepInput = {
  policy: { mode: 'suspend', idleSeconds: 10 },
  memoryMb: 256,
  power: 'running',
  idleMs: 0,
  canFreeze: true,
};

describe('sleepAction', () => {
  it('does nothing while active or without a policy, or with mode off', () => {
    expect(sleepAction({ ...base, idleMs: 9_999 })).toBe('none');
    expect(sleepAction({ ...base, policy: null, idleMs: 1e9 })).toBe('none');
    expect(sleepAction({ ...base, policy: { mode: 'off', idleSeconds: 10 }, idleMs: 1e9 })).toBe(
      'none',
    );
  });

  it('suspends an idle database, and stops one above 2048 MB or without a freezer', () => {
    expect(sleepAction({ ...base, idleMs: 10_000 })).toBe('suspend');
    expect(sleepAction({ ...base, idleMs: 10_000, memoryMb: 2048 })).toBe('suspend');
    expect(sleepAction({ ...base, idleMs: 10_000, memoryMb: 2049 })).toBe('stop');
    expect(sleepAction({ ...base, idleMs: 10_000, canFreeze: false })).toBe('stop');
  });

  it('stops with mode stop', () => {
    expect(
      sleepAction({ ...base, policy: { mode: 'stop', idleSeconds: 10 }, idleMs: 10_000 }),
    ).toBe('stop');
  });

  it('stops a suspended database after stopAfterSeconds, and never acts on a stopped one', () => {
    const policy = { mode: 'suspend' as const, idleSeconds: 10, stopAfterSeconds: 60 };
    expect(sleepAction({ ...base, policy, power: 'suspended', idleMs: 59_000 })).toBe('none');
    expect(sleepAction({ ...base, policy, power: 'suspended', idleMs: 60_000 })).toBe('stop');
    expect(sleepAction({ ...base, policy, power: 'stopped', idleMs: 1e9 })).toBe('none');
  });
});
