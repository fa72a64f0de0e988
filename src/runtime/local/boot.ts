/**
 * Starting a machine's process and waiting until it is ready, or turning a failed start
 * into the MachineStartError the spec names (7.3) with the console output of that start.
 * A failed or aborted start stops the machine again: nothing keeps running half-started.
 */
import { MachineStartError, type MachineSpec } from '../runtime.js';
import { readLogs, type ExitStatus, type Sandboxes } from '../sandbox/index.js';
import type { ChildProcess } from 'node:child_process';
import { mkdir } from 'node:fs/promises';
import { machinePaths, prepareMachine, type PrepareContext } from './prepare.js';
import { DEFAULT_MAX_WAIT_MS, waitReady } from './readiness.js';
import type { MachineRecord } from './records.js';

/** Most of a boot log kept in a MachineStartError: its last lines, at most this many bytes. */
const BOOT_LOG_BYTES = 64 * 1024;

/** What `bootMachine` works with. */
export interface BootContext extends PrepareContext {
  sandboxes: Sandboxes;
  /** Stops the machine and unmounts its root (the runtime's stop without the lock). */
  halt: (record: MachineRecord) => Promise<void>;
}

/**
 * Prepares the host side, runs the process (unless it already runs: a retried call then
 * only waits) and waits for readiness. `bootMs` runs from the spawn to ready.
 */
export async function bootMachine(
  ctx: BootContext,
  spec: MachineSpec,
  record: MachineRecord,
  signal?: AbortSignal,
): Promise<{ bootMs: number }> {
  const already = (await ctx.sandboxes.find(record.id)) !== undefined;
  // Starting a suspended machine means running it again, not timing out on a frozen port.
  if (already && (await ctx.cgroups.isFrozen(record.id))) await ctx.cgroups.thaw(record.id);
  // The keeper (a Node process, ~70 ms to start) boots while the host side is prepared.
  const keeper = already ? undefined : startKeeperEarly(ctx, record);
  const prepared = await prepareMachine(ctx, spec, record).catch(async (err: unknown) => {
    const early = await keeper;
    if (early?.connected) early.disconnect();
    throw err;
  });
  const early = await keeper;
  const { sandbox, paths } = prepared;
  const before = (await readLogs(paths.state, { tail: 1 })).cursor;
  const spawned = performance.now();
  if (!already) {
    try {
      await ctx.sandboxes.run(sandbox, early);
    } catch (err) {
      await ctx.halt(record).catch(() => {});
      throw new MachineStartError(
        'create-failed',
        `the machine's process could not be started: ${(err as Error).message}`,
        await bootLog(paths.state, before),
      );
    }
  }
  const result = await waitReady(spec, {
    host: record.ip,
    exited: () => exited(ctx.sandboxes, record.id),
    ...(signal ? { signal } : {}),
  }).catch(async (err: unknown) => {
    await ctx.halt(record).catch(() => {});
    throw err;
  });
  if (result.ready) return { bootMs: Math.round(performance.now() - spawned) };
  await ctx.halt(record);
  const log = await bootLog(paths.state, before);
  if ('exit' in result) {
    const { code, signal: sig } = result.exit;
    const how = code ?? `unknown${sig ? ` (${sig})` : ''}`;
    throw new MachineStartError(
      'guest-exited',
      `the process exited with code ${how} during start`,
      log,
    );
  }
  const waited = spec.healthCheck?.maxWaitMs ?? DEFAULT_MAX_WAIT_MS;
  const what = spec.healthCheck?.path
    ? `port ${spec.internalPort} did not pass the health check ${spec.healthCheck.path}`
    : `nothing accepted connections on port ${spec.internalPort}`;
  throw new MachineStartError('port-timeout', `${what} within ${waited} ms`, log);
}

/** A keeper for the machine's next run, or none when its state directory cannot be made yet. */
async function startKeeperEarly(
  ctx: BootContext,
  record: MachineRecord,
): Promise<ChildProcess | undefined> {
  // A create makes the writable layer (where the state directory is) meanwhile.
  const layer = await (ctx.volumeReady ?? Promise.resolve()).then(
    () => true,
    () => false,
  );
  if (!layer) return undefined;
  const state = machinePaths(ctx.machinesDir, record.id, record.volumePath).state;
  const made = await mkdir(state, { recursive: true, mode: 0o700 }).then(
    () => true,
    () => false,
  );
  return made ? ctx.sandboxes.startKeeper(state) : undefined;
}

/** The exit status once the process has ended; undefined while it runs. */
async function exited(sandboxes: Sandboxes, id: string): Promise<ExitStatus | undefined> {
  if ((await sandboxes.find(id)) !== undefined) return undefined;
  // The keeper writes the status once it has drained the pipes: the boot log is complete.
  return sandboxes
    .waitExit(id, 5_000)
    .catch((): ExitStatus => ({ code: null, signal: null, at: new Date().toISOString() }));
}

/** The console output after `cursor`: its last lines, up to BOOT_LOG_BYTES. */
async function bootLog(stateDir: string, cursor: number): Promise<string> {
  const page = await readLogs(stateDir, { after: cursor, limit: 10_000 }).catch(() => undefined);
  const text = (page?.entries ?? []).map((e) => e.text).join('\n');
  return text.length > BOOT_LOG_BYTES ? text.slice(-BOOT_LOG_BYTES) : text;
}
