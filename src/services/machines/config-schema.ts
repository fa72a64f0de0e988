/**
 * The defaults of the machine config of spec 2.12 (the schema, `machineConfigSchema`, and
 * the record's `MachineConfig` are in src/contracts/machines.ts): answers always carry
 * vcpus, memoryMb, env, internalPort, suspendPolicy, durableCheckpoint and console.
 */
import {
  MACHINE_CLASSES,
  type MachineConfig,
  type MachineConfigInput,
} from '../../contracts/machines.js';

/**
 * Fills in the defaults. Without a policy of its own a machine never sleeps (spec 2.12:
 * a new app without one never sleeps; a deploy without one keeps the app's rule, which
 * the caller passes as `appPolicy`).
 */
export function withDefaults(
  c: MachineConfigInput,
  appPolicy?: MachineConfig['suspendPolicy'],
): MachineConfig {
  const vcpus = c.vcpus ?? (c.class ? MACHINE_CLASSES[c.class] : 1);
  const policy = c.suspendPolicy
    ? {
        mode: c.suspendPolicy.mode ?? 'suspend',
        idleSeconds: c.suspendPolicy.idleSeconds ?? 300,
        ...(c.suspendPolicy.stopAfterSeconds !== undefined
          ? { stopAfterSeconds: c.suspendPolicy.stopAfterSeconds }
          : {}),
      }
    : (appPolicy ?? { mode: 'off' as const, idleSeconds: 300 });
  return {
    ...c,
    vcpus,
    memoryMb: c.memoryMb ?? 512,
    env: c.env ?? {},
    internalPort: c.internalPort ?? 3000,
    suspendPolicy: policy,
    durableCheckpoint: c.durableCheckpoint ?? false,
    console: c.console ?? false,
  };
}
