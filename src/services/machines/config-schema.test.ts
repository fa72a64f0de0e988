import { describe, expect, it } from 'vitest';
import { toIssues } from '../../http/plugins/validation.js';
import { machineConfigSchema } from '../../contracts/machines.js';
import { withDefaults } from './config-schema.js';

function issuesOf(input: unknown) {
  const r = machineConfigSchema.safeParse(input, { reportInput: true });
  return r.success ? [] : toIssues(r.error.issues);
}

describe('machine config', () => {
  it('takes a minimal config and fills the fields answers always carry', () => {
    const parsed = machineConfigSchema.parse({ image: 'localhost:5000/app:1' });
    expect(withDefaults(parsed)).toEqual({
      image: 'localhost:5000/app:1',
      vcpus: 1,
      memoryMb: 512,
      env: {},
      internalPort: 3000,
      suspendPolicy: { mode: 'off', idleSeconds: 300 },
      durableCheckpoint: false,
      console: false,
    });
  });

  it('derives vcpus from a class and keeps the app rule without a policy of its own', () => {
    const c = machineConfigSchema.parse({ image: 'x', class: 'performance-4x' });
    const appRule = { mode: 'suspend' as const, idleSeconds: 60 };
    expect(withDefaults(c, appRule)).toMatchObject({ vcpus: 4, suspendPolicy: appRule });
    const own = machineConfigSchema.parse({ image: 'x', suspendPolicy: { mode: 'stop' } });
    expect(withDefaults(own, appRule).suspendPolicy).toEqual({ mode: 'stop', idleSeconds: 300 });
  });

  it('reports every bound of spec part 8 at once', () => {
    const paths = issuesOf({
      image: '',
      vcpus: 17,
      memoryMb: 127,
      diskMb: 511,
      volumeGb: 501,
      start: '',
      internalPort: 0,
      killTimeoutS: 301,
      checkpointIntervalS: 4,
      command: [],
      exposePorts: [1, 2, 3, 4, 5, 6, 7, 8, 9],
      region: 'x',
      healthCheck: { timeoutMs: 99, intervalMs: 10_001, healthyThreshold: 11, maxWaitMs: 999 },
      restart: { retries: 11 },
      killSignal: 'SIGSTOP',
      egress: { mode: 'allowlist' },
      extra: true,
    }).map((i) => i.path);
    expect(paths.sort()).toEqual(
      [
        'image',
        'vcpus',
        'memoryMb',
        'diskMb',
        'volumeGb',
        'start',
        'internalPort',
        'killTimeoutS',
        'checkpointIntervalS',
        'command',
        'exposePorts',
        'region',
        'healthCheck.timeoutMs',
        'healthCheck.intervalMs',
        'healthCheck.healthyThreshold',
        'healthCheck.maxWaitMs',
        'restart.retries',
        'killSignal',
        'egress.domains',
        'egress.cidrs',
        'extra',
      ].sort(),
    );
  });

  it('refuses a class that contradicts vcpus', () => {
    expect(issuesOf({ image: 'x', class: 'shared-cpu-2x', vcpus: 4 })).toEqual([
      { path: 'vcpus', message: 'contradicts class shared-cpu-2x, which has 2 vCPUs' },
    ]);
    expect(issuesOf({ image: 'x', class: 'shared-cpu-2x', vcpus: 2 })).toEqual([]);
  });
});
