/**
 * Starting and stopping one instance's server, given its volume's paths. Both are
 * idempotent: start finds a running server and only waits for it to answer; stop finds a
 * stopped one and only clears its leftovers.
 */
import { handOverIfForeign } from '../../host/tree-owner.js';
import type { EngineEnv, InstanceSpec } from '../engine.js';
import type { RedisBinaries } from './binaries.js';
import { waitReady, withAdmin } from './control.js';
import { writeLayout } from './layout.js';
import type { RedisPaths } from './paths.js';
import { removePidFile, runningPid, signal, spawnServer, waitExit } from './process.js';
import { RespClosedError, type RespConnection } from './resp.js';

/** How long a stop waits for SHUTDOWN before it signals (a fast stop may save an RDB). */
const SHUTDOWN_GRACE_MS = { fast: 120_000, immediate: 5_000 };
const TERM_GRACE_MS = 10_000;

/** Starts the server of `inst` at `paths` unless it runs; resolves when it answers PING. */
export async function startServer(
  env: EngineEnv,
  inst: InstanceSpec,
  paths: RedisPaths,
  bins: RedisBinaries,
): Promise<void> {
  const running = await runningPid(paths, bins);
  if (running !== undefined) return waitReady(paths, running);
  // Data of an older pier (one user for every server) becomes this identity's alone.
  await handOverIfForeign(paths.dataDir, env.user);
  await writeLayout(env, inst, paths);
  await removePidFile(paths);
  const started = Date.now();
  const pid = await spawnServer(paths, bins, env.user);
  await waitReady(paths, pid);
  env.log.info({ id: inst.id, pid, ms: Date.now() - started }, 'redis started');
}

/**
 * Starts the server with `extraArgs` after the config file (temporary overrides), for
 * work on the data before the instance is served; the caller stops it.
 */
export async function startServerWith(
  env: EngineEnv,
  paths: RedisPaths,
  bins: RedisBinaries,
  extraArgs: string[],
): Promise<number> {
  await removePidFile(paths);
  const pid = await spawnServer(paths, bins, env.user, extraArgs);
  await waitReady(paths, pid);
  return pid;
}

/** The SHUTDOWN that fits: a persistent server fsyncs its AOF; others save an RDB. */
async function shutdownArgs(mode: 'fast' | 'immediate', conn: RespConnection): Promise<string[]> {
  if (mode === 'immediate') return ['SHUTDOWN', 'NOSAVE', 'NOW', 'FORCE'];
  const reply = await conn.command(['CONFIG', 'GET', 'appendonly']);
  const aof = Array.isArray(reply) && reply[1] === 'yes';
  // Without an AOF the data lives in memory only; a planned stop (the host putting an
  // idle database to sleep) must not lose it, so it is saved and loaded at the next start.
  return aof ? ['SHUTDOWN'] : ['SHUTDOWN', 'SAVE'];
}

/**
 * Stops the server at `paths` if it runs: SHUTDOWN over the control socket, then SIGTERM,
 * then SIGKILL if it still has not ended. `immediate` discards unsaved data (deletes).
 */
export async function stopServer(
  env: EngineEnv,
  paths: RedisPaths,
  bins: RedisBinaries,
  mode: 'fast' | 'immediate' = 'fast',
): Promise<void> {
  const pid = await runningPid(paths, bins);
  if (pid === undefined) return removePidFile(paths);
  try {
    await withAdmin(paths, async (conn) => {
      const args = await shutdownArgs(mode, conn);
      try {
        await conn.command(args, SHUTDOWN_GRACE_MS[mode]);
      } catch (err) {
        if (err instanceof RespClosedError) return; // it closed the connection: shutting down
        // A save that failed (a full disk) keeps the server up; stopping matters more.
        env.log.warn({ err, pid, args }, 'redis refused SHUTDOWN; stopping without saving');
        await conn.command(['SHUTDOWN', 'NOSAVE', 'NOW', 'FORCE']).catch(() => undefined);
      }
    });
  } catch (err) {
    env.log.warn({ err, pid }, 'no control connection to redis; signalling it');
  }
  if (!(await waitExit(pid, SHUTDOWN_GRACE_MS[mode]))) {
    signal(pid, 'SIGTERM');
    if (!(await waitExit(pid, TERM_GRACE_MS))) {
      env.log.warn({ pid }, 'redis ignored SIGTERM; killing it');
      signal(pid, 'SIGKILL');
      await waitExit(pid, TERM_GRACE_MS);
    }
  }
  await removePidFile(paths);
  env.log.info({ pid, mode }, 'redis stopped');
}
