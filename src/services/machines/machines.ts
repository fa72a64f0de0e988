/**
 * Machines of an app (spec 4.9): create (waiting for `running` unless `wait=false`), list,
 * read and wait. The row and its create job commit together; the job makes the machine
 * on the host through the `MachineRuntime`, so a restart in the middle resumes the work.
 */
import { hasBucketAttachments } from '../buckets/attachments.js';
import { newId } from '../../crypto/tokens.js';
import { ApiError } from '../../errors/api-error.js';
import { enqueue } from '../../jobs/queue.js';
import type { MachineSpec } from '../../runtime/runtime.js';
import { findApp } from '../apps/records.js';
import { buildImageRef } from '../builds/records.js';
import { attachedFrontPorts } from '../databases/attachments.js';
import type { ServiceContext } from '../context.js';
import { nameAvailability } from '../names.js';
import { assertOrgRoom, type OrgAddition } from '../org-limits.js';
import { revealSecrets } from '../secrets.js';
import { openReleaseSecrets } from '../deploys/release-secrets.js';
import { attachVolume } from '../volumes/attachments.js';
import { createVolume } from '../volumes/volumes.js';
import type { Machine, MachineConfig, MachineConfigInput } from '../../contracts/machines.js';
import { withDefaults } from './config-schema.js';
import {
  configOf,
  findMachine,
  liveMachineIds,
  machinesQuery,
  toMachine,
  type MachineRow,
} from './records.js';
import { nextChange } from './state-events.js';
import { TRANSITIONAL, type MachineState } from './states.js';

/** How long a create that waits may take beyond the machine's own readiness bound. */
const WAIT_SLACK_MS = 30_000;

export async function createMachine(
  ctx: ServiceContext,
  orgId: string,
  appName: string,
  body: MachineConfigInput,
  wait: boolean,
  opts: {
    /** A deploy-style replace of this machine of the app (see replace.ts). */
    replace?: string | undefined;
    /** The release the machine belongs to: it runs with that release's secrets. */
    releaseId?: string;
  } = {},
): Promise<{ machine: Machine; waited: boolean }> {
  const { replace } = opts;
  // A build of another organization (or none) is `build-not-found`; one without an image yet, `build-not-ready`.
  if (body.image.startsWith('build:')) await buildImageRef(ctx.db, orgId, body.image.slice(6));
  const config = withDefaults(body);
  const id = newId('mch');
  // The machine replaced does not count: it goes once the new one runs.
  const adds: OrgAddition = {
    machines: 1,
    memoryMb: config.memoryMb,
    ...(replace !== undefined ? { replacing: replace } : {}),
  };
  // Refused before any volume is made or image pulled; the locked count below decides.
  await assertOrgRoom(ctx.db, orgId, adds, { lock: false });
  // volumeGb makes the app's volume first (mounted at /data), unless the app has one.
  if (body.volumeGb !== undefined) await ensureAppVolume(ctx, orgId, appName, body.volumeGb);
  const row = await ctx.db.transaction().execute(async (tx) => {
    // The org row first (as app creates lock it), then the app's.
    await assertOrgRoom(tx, orgId, adds);
    const app = await findApp(tx, orgId, appName, { lock: true });
    if (replace !== undefined) {
      const old = await tx
        .selectFrom('machines')
        .select('id')
        .where('id', '=', replace)
        .where('app_id', '=', app.id)
        .where('observed_state', '<>', 'deleted')
        .executeTakeFirst();
      if (!old)
        throw new ApiError('not-found', `The app '${appName}' has no machine '${replace}'.`);
    }
    const volumes = await tx
      .selectFrom('volumes')
      .select('id')
      .where('app_id', '=', app.id)
      .execute();
    if (volumes.length > 0) {
      // The machine being replaced does not count.
      const [live] = (await liveMachineIds(tx, app.id)).filter((id) => id !== replace);
      if (live) {
        throw new ApiError(
          'volume-needs-single-machine',
          `The app '${appName}' has a volume, so it runs exactly one machine (${live}).`,
        );
      }
    }
    const org = await tx
      .selectFrom('orgs')
      .select('region')
      .where('id', '=', orgId)
      .executeTakeFirstOrThrow();
    await tx
      .insertInto('machines')
      .values({
        id,
        org_id: orgId,
        app_id: app.id,
        host: 'local',
        region: body.region ?? org.region,
        config: JSON.stringify(config),
        desired_state: 'running',
        observed_state: 'requested',
        private_ip: null,
        boot_ms: null,
        volume_id: volumes[0]?.id ?? null,
        create_error: null,
        create_error_code: null,
        create_boot_log: null,
        create_warning: null,
        release_id: opts.releaseId ?? null,
        created_at: ctx.clock(),
      })
      .execute();
    await enqueue(tx, ctx.jobs, 'machines.create', {
      machineId: id,
      ...(replace !== undefined ? { replaces: replace } : {}),
    });
    return findMachine(tx, orgId, id);
  });
  if (!wait) return { machine: toMachine(row), waited: false };
  const maxMs = (config.healthCheck?.maxWaitMs ?? 60_000) + WAIT_SLACK_MS;
  const done = await waitForState(ctx, orgId, id, ['running', 'failed'], maxMs);
  if (done.observed_state === 'failed') {
    const code = (done.create_error_code ?? 'create-failed') as
      'create-failed' | 'guest-exited' | 'port-timeout' | 'no-capacity' | 'lease-held';
    throw new ApiError(code, done.create_error ?? 'The machine could not be created.', {
      machine: toMachine(done),
    });
  }
  return { machine: toMachine(done), waited: true };
}

/**
 * Gives the app a volume of `sizeGb` named `<app>-data` (or `<app>-data-2`, … when taken),
 * attached to it, unless it has one already (then that one is used).
 */
async function ensureAppVolume(
  ctx: ServiceContext,
  orgId: string,
  appName: string,
  sizeGb: number,
) {
  const app = await findApp(ctx.db, orgId, appName);
  const has = await ctx.db
    .selectFrom('volumes')
    .select('id')
    .where('app_id', '=', app.id)
    .executeTakeFirst();
  if (has) return;
  for (let n = 1; n <= 20; n++) {
    const name = `${appName.slice(0, 50)}-data${n > 1 ? `-${n}` : ''}`;
    if (await nameAvailability(ctx.db, orgId, name)) continue;
    await createVolume(ctx, orgId, { name, sizeGb });
    await attachVolume(ctx, orgId, appName, name);
    return;
  }
  throw new ApiError(
    'conflict',
    `No free name for a volume of '${appName}'; create one and attach it.`,
  );
}

export async function listMachines(ctx: ServiceContext, orgId: string, appName: string) {
  const app = await findApp(ctx.db, orgId, appName);
  const rows = await machinesQuery(ctx.db)
    .where('machines.app_id', '=', app.id)
    .where('machines.observed_state', '<>', 'deleted')
    .orderBy('machines.created_at')
    .execute();
  return rows.map(toMachine);
}

export async function getMachine(ctx: ServiceContext, orgId: string, id: string) {
  return toMachine(await findMachine(ctx.db, orgId, id));
}

/**
 * Polls until the machine's observed state is one of `states`, or answers 408
 * `wait-timeout`. A machine that failed or was deleted meanwhile ends the wait too.
 */
export async function waitForState(
  ctx: ServiceContext,
  orgId: string,
  id: string,
  states: MachineState[],
  timeoutMs: number,
  signal?: AbortSignal,
): Promise<MachineRow> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const row = await findMachine(ctx.db, orgId, id);
    const observed = row.observed_state as MachineState;
    if (states.includes(observed)) return row;
    if (!TRANSITIONAL.has(observed) && !states.includes(observed) && states.length === 1) {
      // Not on its way there: waiting on would only time out.
      if (observed === 'failed' || observed === 'deleted') return row;
    }
    // A key revoked or expired meanwhile answers as it would on a new request.
    if (signal?.aborted && signal.reason instanceof ApiError) throw signal.reason;
    if (Date.now() >= end || signal?.aborted) {
      throw new ApiError(
        'wait-timeout',
        `The machine is ${observed}; it did not become ${states.join(' or ')} in time.`,
      );
    }
    await nextChange(ctx, id, 100);
  }
}

/**
 * The secrets a machine starts with: a machine of a release gets the values the release
 * recorded (with today's managed ones); one made outside deploys, the app's values now.
 */
async function machineSecrets(ctx: ServiceContext, row: MachineRow) {
  if (!row.release_id) return revealSecrets(ctx.db, ctx, row.app_id);
  const release = await ctx.db
    .selectFrom('releases')
    .select(['id', 'secrets_nonce', 'secrets_sealed'])
    .where('id', '=', row.release_id)
    .executeTakeFirst();
  if (!release) return revealSecrets(ctx.db, ctx, row.app_id);
  return {
    ...openReleaseSecrets(ctx, release),
    ...(await revealSecrets(ctx.db, ctx, row.app_id, { only: 'managed' })),
  };
}

/** The runtime's view of a machine: its config resolved, with the app's secrets. */
export async function specOf(ctx: ServiceContext, row: MachineRow): Promise<MachineSpec> {
  const config: MachineConfig = configOf(row);
  const secrets = await machineSecrets(ctx, row);
  const volumes = row.volume_id
    ? await ctx.db
        .selectFrom('volumes')
        .select(['pool_volume', 'mount_path'])
        .where('id', '=', row.volume_id)
        .execute()
    : [];
  return {
    id: row.id,
    // `build:<id>`: the build's image in the store, by digest (never a registry lookup).
    image: config.image.startsWith('build:')
      ? await buildImageRef(ctx.db, row.org_id, config.image.slice(6))
      : config.image,
    vcpus: config.vcpus,
    memoryMb: config.memoryMb,
    diskMb: config.diskMb ?? 2048,
    // A secret wins over a plain variable of the same name, as on Fly.io: secrets are
    // where credentials belong, and a stale `env` must not shadow a rotated one.
    env: { ...config.env, ...secrets },
    ...(config.start ? { start: config.start } : {}),
    ...(config.command ? { command: config.command } : {}),
    internalPort: config.internalPort,
    readiness: config.readiness ?? (config.command ? 'boot' : 'port'),
    ...(config.healthCheck
      ? {
          healthCheck: {
            ...(config.healthCheck.path ? { path: config.healthCheck.path } : {}),
            timeoutMs: config.healthCheck.timeoutMs ?? 2000,
            intervalMs: config.healthCheck.intervalMs ?? 500,
            healthyThreshold: config.healthCheck.healthyThreshold ?? 1,
            maxWaitMs: config.healthCheck.maxWaitMs ?? 60_000,
          },
        }
      : {}),
    ...(config.killSignal ? { killSignal: config.killSignal } : {}),
    killTimeoutS: config.killTimeoutS ?? 10,
    volumes: volumes.map((v) => ({ volume: v.pool_volume, mountPath: v.mount_path })),
    hostname: row.id,
    // The organization is the wall: its machines reach each other, no one else's; on
    // the host, only the fronts of the databases attached to its app, and the services
    // listener (the S3 endpoint) when a bucket is.
    network: {
      group: row.org_id,
      ...(config.egress ? { egress: config.egress } : {}),
      hostPorts: [
        ...(await attachedFrontPorts(ctx.db, row.app_id)),
        ...((await hasBucketAttachments(ctx.db, row.app_id)) ? [ctx.config.servicesPort] : []),
      ],
    },
  };
}
