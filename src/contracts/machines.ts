/**
 * Machines (spec 2.11 machine, 2.12 machine config, 3 states, 4.9 machines, 7.6 shell and
 * file transfer, 8 limits; docs/api.md documents what the spec leaves open): the config a
 * machine is created with and the record it answers, the states, the wait, action and logs
 * routes, checkpoints, shell sessions (exec) and files.
 */
import { z } from 'zod';
import { suspendPolicySchema } from './databases.js';

// States (spec 2.11, 3).

export const MACHINE_STATES = [
  'requested',
  'scheduled',
  'starting',
  'running',
  'suspending',
  'suspended',
  'stopping',
  'stopped',
  'deleted',
  'failed',
] as const;
export type MachineState = (typeof MACHINE_STATES)[number];

export const MACHINE_ACTIONS = ['start', 'stop', 'suspend', 'destroy'] as const;
export type MachineAction = (typeof MACHINE_ACTIONS)[number];

// The config (spec 2.12): every bound of spec part 8, the rules that tie fields together
// (a class must not contradict `vcpus`), and the defaults answers always carry.

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

export const machineConfigFields = {
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
};

/** The body of `POST /v1/apps/:name/machines`. */
export const machineConfigSchema = z
  .strictObject(machineConfigFields)
  .superRefine(classMatchesVcpus);

/** A class must not contradict `vcpus`. */
export function classMatchesVcpus(
  c: { class?: MachineClass | undefined; vcpus?: number | undefined },
  ctx: z.RefinementCtx,
): void {
  if (c.class && c.vcpus !== undefined && MACHINE_CLASSES[c.class] !== c.vcpus) {
    ctx.addIssue({
      code: 'custom',
      path: ['vcpus'],
      message: `contradicts class ${c.class}, which has ${MACHINE_CLASSES[c.class]} vCPUs`,
    });
  }
}
export type MachineConfigInput = z.infer<typeof machineConfigSchema>;

/** The config as answers carry it: the always-present fields filled in. */
export const machineConfigRecordSchema = z.object({
  ...machineConfigFields,
  vcpus: z.number(),
  memoryMb: z.number(),
  env: z.record(z.string(), z.string()),
  internalPort: z.number(),
  suspendPolicy: z.object({
    mode: z.enum(['suspend', 'stop', 'off']),
    idleSeconds: z.number(),
    stopAfterSeconds: z.number().optional(),
  }),
  durableCheckpoint: z.boolean(),
  console: z.boolean(),
});
export type MachineConfig = z.infer<typeof machineConfigRecordSchema>;

// The record (spec 2.11).

const state = z.enum(MACHINE_STATES);

export const machineSchema = z.object({
  id: z.string(),
  appName: z.string(),
  /** The create body with its defaults filled in. */
  config: machineConfigRecordSchema,
  desiredState: state,
  observedState: state,
  host: z.string().optional(),
  privateIp: z.string().optional(),
  region: z.string(),
  readyAt: z.string().optional(),
  checkpointAt: z.string().optional(),
  liveness: z.enum(['listening', 'not-listening', 'no-signal']).optional(),
  livenessReason: z.string().optional(),
  livenessSince: z.string().optional(),
  livenessAt: z.string().optional(),
  createError: z.string().optional(),
  createErrorCode: z.string().optional(),
  createBootLog: z.string().optional(),
  createWarning: z.string().optional(),
  createdAt: z.string(),
  bootMs: z.number().optional(),
  restarts: z.number(),
});
export type Machine = z.infer<typeof machineSchema>;

export const machineListSchema = z.array(machineSchema);

// Parameters and queries of the machine routes.

export const machineAppParams = z.object({ name: z.string().min(1).max(63) });
export const machineIdParams = z.object({ id: z.string().min(1).max(64) });
export const machineActionParams = machineIdParams.extend({ action: z.enum(MACHINE_ACTIONS) });

export const createMachineQuery = z.strictObject({
  wait: z.enum(['true', 'false']).optional(),
  /** Deploy-style: this machine of the app stops first and is destroyed once the new one runs. */
  replace: z.string().min(1).max(64).optional(),
});

export const waitQuery = z.strictObject({
  state: z.enum(MACHINE_STATES).optional(),
  timeout: z.coerce.number().int().min(1).max(300).optional(),
});

// Logs.

export const logsQuery = z.strictObject({
  cursor: z.string().max(8192).optional(),
  limit: z.coerce.number().int().min(1).max(1000).optional(),
  machine: z.string().max(64).optional(),
});

/** One line of console output. */
export const logEntrySchema = z.object({
  machineId: z.string(),
  at: z.string(),
  stream: z.enum(['stdout', 'stderr']),
  text: z.string(),
});
export type LogEntry = z.infer<typeof logEntrySchema>;

/** The answer of `GET /v1/apps/:name/logs`. */
export const appLogsSchema = z.object({
  entries: z.array(logEntrySchema),
  cursor: z.string(),
  /** Machines whose entries after the cursor were rotated away before this read. */
  truncated: z.array(z.string()),
});
export type AppLogs = z.infer<typeof appLogsSchema>;

// Checkpoints (docs/api.md "Machine checkpoints").

export const checkpointLabel = z
  .string()
  .min(1)
  .max(63)
  .regex(
    /^[a-z0-9][a-z0-9.-]*$/,
    'lowercase letters, digits, dots and dashes, starting with a letter or digit',
  );

export const createCheckpointBody = z
  .strictObject({
    label: checkpointLabel.optional(),
    memory: z.boolean().optional(),
  })
  .nullish();
export type CreateCheckpointBody = z.infer<typeof createCheckpointBody>;

export const restoreCheckpointBody = z
  .strictObject({ keepCurrent: z.boolean().optional() })
  .nullish();

export const checkpointSchema = z.object({
  label: z.string(),
  machineId: z.string(),
  createdAt: z.string(),
  auto: z.boolean(),
  memory: z.boolean(),
  sizeMb: z.number().optional(),
});
export type Checkpoint = z.infer<typeof checkpointSchema>;

export const checkpointListSchema = z.array(checkpointSchema);

export const checkpointListQuery = z.strictObject({
  auto: z.enum(['0', '1', 'true', 'false']).optional(),
});

export const checkpointParams = machineIdParams.extend({ label: z.string().min(1).max(63) });

/** The machine after a restore, with the checkpoint it came from and where its old disk went. */
export const restoreAnswerSchema = machineSchema.extend({
  restoredFrom: z.string(),
  savedAs: z.string().optional(),
});
export type RestoreAnswer = z.infer<typeof restoreAnswerSchema>;

// Shell sessions (exec): the query of the upgrade, the sessions listed, the text frames.

const flag = z.enum(['true', 'false', '1', '0']).transform((v) => v === 'true' || v === '1');

export const execQuery = z.strictObject({
  /** The argv, one `cmd` per argument; absent: an interactive shell. */
  cmd: z
    .union([z.string().min(1).max(8192), z.array(z.string().min(1).max(8192)).min(1).max(256)])
    .optional(),
  tty: flag.optional(),
  cols: z.coerce.number().int().min(1).max(1000).optional(),
  rows: z.coerce.number().int().min(1).max(1000).optional(),
});

export const execSessionsQuery = z.strictObject({ all: flag.optional() });

export const execSessionSchema = z.object({
  id: z.string(),
  machineId: z.string(),
  /** The command, or absent for an interactive shell. */
  command: z.array(z.string()).optional(),
  tty: z.boolean(),
  keyId: z.string(),
  agent: z.boolean(),
  startedAt: z.string(),
  endedAt: z.string().optional(),
  exitCode: z.number().optional(),
  exitSignal: z.string().optional(),
  endReason: z.string().optional(),
});
export type ExecSession = z.infer<typeof execSessionSchema>;

export const execSessionListSchema = z.array(execSessionSchema);

/** Control messages a client may send as text frames. */
export const execClientMessage = z.discriminatedUnion('type', [
  z.object({
    type: z.literal('resize'),
    cols: z.number().int().min(1).max(1000),
    rows: z.number().int().min(1).max(1000),
  }),
  z.object({ type: z.literal('eof') }),
]);
export type ExecClientMessage = z.infer<typeof execClientMessage>;

// Files.

const guestPath = z.string().min(1).max(4096).startsWith('/', 'must be an absolute path');

export const filePathQuery = z.strictObject({ path: guestPath });

export const fileWriteQuery = z.strictObject({
  path: guestPath,
  mode: z
    .string()
    .regex(/^0?[0-7]{3,4}$/, 'must be octal permission bits like 0644')
    .optional(),
});

export const fileWrittenSchema = z.object({ path: z.string(), size: z.number() });

export const dirEntrySchema = z.object({
  name: z.string(),
  type: z.enum(['file', 'dir', 'symlink', 'other']),
  size: z.number(),
  mode: z.string(),
  uid: z.number(),
  gid: z.number(),
  modifiedAt: z.string(),
  target: z.string().optional(),
});
export type DirEntry = z.infer<typeof dirEntrySchema>;

export const dirListingSchema = z.object({ path: z.string(), entries: z.array(dirEntrySchema) });
export type DirListing = z.infer<typeof dirListingSchema>;
