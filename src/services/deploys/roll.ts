/**
 * Moving an app's machines to a release (CONTRACT 7, behaviour 3). Every step is read
 * back from the store, so a deploy resumed after a crash carries on from where it was:
 * machines of the release are told from the ones it replaces by their `release_id`.
 *
 * - Without a volume, the new machines start first (`rolling`: one at a time, each
 *   healthy — its readiness, 2.12 `healthCheck` else the port — before the next;
 *   `immediate`: all at once). Only when all of them run are the old ones retired: taken
 *   out of the proxy's routes, drained of the requests under way, then destroyed. So a
 *   client sees no refused request, and a deploy that fails leaves the old machines
 *   serving untouched (which needs room in the organization's limits for both sets for
 *   the time of the deploy).
 * - With a volume the app runs exactly one machine: it is stopped first, and started
 *   again if the new one does not come up (machines/replace.ts).
 */
import type { MachineConfig } from '../../contracts/machines.js';
import { ApiError } from '../../errors/api-error.js';
import type { ServiceContext } from '../context.js';
import { machineAction } from '../machines/lifecycle.js';
import { createMachine, waitForState } from '../machines/machines.js';
import { machinesQuery, type MachineRow } from '../machines/records.js';
import { machineChanged, ROUTES_TTL_MS } from '../machines/state-events.js';
import { TRANSITIONAL, type MachineState } from '../machines/states.js';
import { DeployFailure } from './failure.js';
import type { DeployRow } from './records.js';

/** The longest a retiring machine is given to finish its requests (then it is stopped). */
export const DRAIN_MAX_MS = 30_000;
/** How long a new machine may take beyond its own readiness bound before the deploy gives up. */
const START_SLACK_MS = 60_000;

export interface RollTarget {
  deploy: DeployRow;
  releaseId: string;
  config: MachineConfig;
  count: number;
  step: (text: string) => Promise<void>;
  signal: AbortSignal;
}

export async function rollMachines(ctx: ServiceContext, t: RollTarget): Promise<void> {
  const { deploy } = t;
  const hasVolume = await ctx.db
    .selectFrom('volumes')
    .select('id')
    .where('app_id', '=', deploy.app_id)
    .executeTakeFirst();
  if (hasVolume) await replaceTheMachine(ctx, t);
  else await startNewMachines(ctx, t);
  const old = (await machinesOf(ctx, t)).old.filter((m) => m.observed_state !== 'failed');
  for (const [i, m] of old.entries()) {
    if (t.deploy.strategy === 'immediate') break;
    await t.step(`retiring old machine ${i + 1}/${old.length}`);
    await retire(ctx, m, t.signal);
  }
  if (t.deploy.strategy === 'immediate') {
    await t.step(`retiring ${old.length} old machine(s)`);
    await Promise.all(old.map((m) => retire(ctx, m, t.signal)));
  }
}

/** The app's machines: those of the release, and the others (made before it). */
async function machinesOf(ctx: ServiceContext, t: RollTarget) {
  const rows = await machinesQuery(ctx.db)
    .where('machines.app_id', '=', t.deploy.app_id)
    .where('machines.observed_state', '<>', 'deleted')
    .orderBy('machines.created_at')
    .execute();
  return {
    mine: rows.filter((m) => m.release_id === t.releaseId),
    old: rows.filter((m) => m.release_id !== t.releaseId),
  };
}

async function startNewMachines(ctx: ServiceContext, t: RollTarget): Promise<void> {
  for (;;) {
    const { mine } = await machinesOf(ctx, t);
    assertNoneFailed(mine);
    const running = mine.filter((m) => m.observed_state === 'running').length;
    if (running >= t.count) return;
    const starting = mine.filter((m) => TRANSITIONAL.has(m.observed_state as MachineState));
    if (starting.length > 0) {
      await t.step(`waiting for machine ${running + 1}/${t.count} to be healthy`);
      await Promise.all(starting.map((m) => waitUp(ctx, m, t)));
      continue;
    }
    // Running but not wanted (stopped or suspended by a hand meanwhile) counts as failed.
    const missing = t.count - mine.length;
    if (missing <= 0) throw new DeployFailure('A new machine was stopped during the deploy.');
    const now = t.deploy.strategy === 'immediate' ? missing : 1;
    await t.step(
      `starting machine ${mine.length + 1}${now > 1 ? `-${mine.length + now}` : ''}/${t.count}`,
    );
    for (let i = 0; i < now; i++) await create(ctx, t);
  }
}

async function replaceTheMachine(ctx: ServiceContext, t: RollTarget): Promise<void> {
  const first = await machinesOf(ctx, t);
  let { mine } = first;
  if (mine.length === 0) {
    const previous = first.old.find((m) => m.observed_state !== 'failed');
    await t.step('stopping the old machine (the app has a volume), starting the new one');
    await create(ctx, t, previous?.id);
    ({ mine } = await machinesOf(ctx, t));
  }
  for (const m of mine) await waitUp(ctx, m, t);
}

async function create(ctx: ServiceContext, t: RollTarget, replace?: string): Promise<void> {
  try {
    await createMachine(ctx, t.deploy.org_id, t.deploy.app_name, t.config, false, {
      releaseId: t.releaseId,
      replace,
    });
  } catch (err) {
    // Refused before anything was made (org limits, credit): the deploy ends with why.
    if (err instanceof ApiError) throw new DeployFailure(`${err.code}: ${err.message}`);
    throw err;
  }
}

async function waitUp(ctx: ServiceContext, m: MachineRow, t: RollTarget): Promise<void> {
  const bound = (t.config.healthCheck?.maxWaitMs ?? 60_000) + START_SLACK_MS;
  const row = await waitForState(
    ctx,
    t.deploy.org_id,
    m.id,
    ['running', 'failed'],
    bound,
    t.signal,
  ).catch((err: unknown) => {
    if (err instanceof ApiError && err.code === 'wait-timeout' && !t.signal.aborted)
      throw new DeployFailure(`Machine ${m.id} did not become healthy in ${bound / 1000} s.`);
    throw err;
  });
  assertNoneFailed([row]);
}

function assertNoneFailed(machines: MachineRow[]): void {
  const failed = machines.find((m) => m.observed_state === 'failed');
  if (failed) {
    throw new DeployFailure(
      `Machine ${failed.id} did not start (${failed.create_error_code ?? 'create-failed'}): ${failed.create_error ?? 'no reason given'}`,
    );
  }
}

/**
 * Takes an old machine out of the proxy's routes, waits for the requests it is serving
 * (at least as long as other replicas may keep their route lists), then destroys it.
 */
async function retire(ctx: ServiceContext, m: MachineRow, signal: AbortSignal): Promise<void> {
  if (!m.retiring_at) {
    await ctx.db
      .updateTable('machines')
      .set({ retiring_at: new Date() })
      .where('id', '=', m.id)
      .execute();
    machineChanged(ctx, m.id);
  }
  const since = m.retiring_at?.getTime() ?? Date.now();
  const earliest = since + ROUTES_TTL_MS + 250;
  const latest = since + DRAIN_MAX_MS;
  while (!signal.aborted && Date.now() < latest) {
    const busy = (ctx.memory.machineInFlight.get(m.id) ?? 0) > 0;
    if (!busy && Date.now() >= earliest) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  if (signal.aborted) throw signal.reason ?? new Error('deploy interrupted');
  await machineAction(ctx, m.org_id, m.id, 'destroy').catch((err: unknown) => {
    if (err instanceof ApiError && err.code === 'not-found') return;
    throw err;
  });
}

/** A failed deploy takes back every machine it made; the old ones never stopped serving. */
export async function removeNewMachines(
  ctx: ServiceContext,
  deploy: DeployRow,
  releaseId: string,
): Promise<void> {
  const rows = await machinesQuery(ctx.db)
    .where('machines.release_id', '=', releaseId)
    .where('machines.observed_state', '<>', 'deleted')
    .execute();
  for (const m of rows) {
    await machineAction(ctx, deploy.org_id, m.id, 'destroy').catch((err: unknown) =>
      ctx.log.warn({ err, machine: m.id, deploy: deploy.id }, 'deploy: new machine not removed'),
    );
  }
}
