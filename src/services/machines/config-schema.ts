/**
 * The machine config of spec 2.12 as a zod schema: every bound of spec part 8, the rules
 * that tie fields together (a class must not contradict `vcpus`; egress needs all three
 * fields), and the defaults answers always carry (image, vcpus, memoryMb, env,
 * internalPort, suspendPolicy, durableCheckpoint, console).
 */
import { z } from 'zod';
import { suspendPolicySchema } from '../databases/schemas.js';

/** Named sizes and the vCPUs each one means. */
export const MACHINE_CLASSES = {
  'shared-cpu-1x': 1,
  'shared-cpu-2x': 2,
  'shared-cpu-4x': 4,
  'shared-cpu-8x': 8,
  'performance-1x': 1,
  'performance-2x': 2,
  'performance-4x': 4,
  'performance-8x': 8,
} as const;
export type MachineClass = keyof typeof MACHINE_CLASSES;

export const KILL_SIGNALS = [
  'SIGTERM',
  'SIGINT',
  'SIGQUIT',
  'SIGHUP',
  'SIGUSR1',
  'SIGUSR2',
  'SIGWINCH',
  'SIGKILL',
] as const;

const port = z.number().int().min(1).max(65_535);

/** Environment names as a shell would accept them; values are strings. */
const envSchema = z.record(
  z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,255}$/, 'must be a variable name'),
  z.string().max(64 * 1024),
);

export const healthCheckSchema = z.strictObject({
  path: z.string().max(2048).optional(),
  timeoutMs: z.number().int().min(100).max(30_000).optional(),
  intervalMs: z.number().int().min(100).max(10_000).optional(),
  healthyThreshold: z.number().int().min(1).max(10).optional(),
  maxWaitMs: z.number().int().min(1000).max(300_000).optional(),
});

export const restartSchema = z.strictObject({
  policy: z.enum(['never', 'on-failure']).optional(),
  retries: z.number().int().min(1).max(10).optional(),
});

export const egressSchema = z.strictObject({
  mode: z.enum(['deny-all', 'allowlist']),
  domains: z.array(z.string().min(1).max(253)).max(100),
  cidrs: z.array(z.string().min(1).max(43)).max(10),
});

export const machineConfigSchema = z
  .strictObject({
    image: z.string().min(1).max(512),
    class: z.enum(Object.keys(MACHINE_CLASSES) as [MachineClass, ...MachineClass[]]).optional(),
    vcpus: z.number().int().min(1).max(16).optional(),
    memoryMb: z.number().int().min(128).max(16_384).optional(),
    env: envSchema.optional(),
    diskMb: z.number().int().min(512).max(131_072).optional(),
    volumeGb: z.number().int().min(1).max(500).optional(),
    start: z.string().min(1).max(2000).optional(),
    internalPort: port.optional(),
    suspendPolicy: suspendPolicySchema.optional(),
    healthCheck: healthCheckSchema.optional(),
    restart: restartSchema.optional(),
    killSignal: z.enum(KILL_SIGNALS).optional(),
    killTimeoutS: z.number().int().min(1).max(300).optional(),
    durableCheckpoint: z.boolean().optional(),
    checkpointIntervalS: z.number().int().min(5).max(3600).optional(),
    console: z.boolean().optional(),
    command: z.array(z.string().max(4096)).min(1).max(64).optional(),
    diskIsCache: z.boolean().optional(),
    readiness: z.enum(['port', 'boot']).optional(),
    exposePorts: z.array(port).max(8).optional(),
    egress: egressSchema.optional(),
    region: z.string().min(2).max(12).optional(),
  })
  .superRefine((c, ctx) => {
    if (c.class && c.vcpus !== undefined && MACHINE_CLASSES[c.class] !== c.vcpus) {
      ctx.addIssue({
        code: 'custom',
        path: ['vcpus'],
        message: `contradicts class ${c.class}, which has ${MACHINE_CLASSES[c.class]} vCPUs`,
      });
    }
  });
export type MachineConfigInput = z.infer<typeof machineConfigSchema>;

/** The config as answers carry it: the always-present fields filled in. */
export interface MachineConfig extends MachineConfigInput {
  vcpus: number;
  memoryMb: number;
  env: Record<string, string>;
  internalPort: number;
  suspendPolicy: {
    mode: 'suspend' | 'stop' | 'off';
    idleSeconds: number;
    stopAfterSeconds?: number;
  };
  durableCheckpoint: boolean;
  console: boolean;
}

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
