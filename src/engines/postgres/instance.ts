/**
 * Steps every operation on one instance shares: start it from its recorded role, build a
 * volume that cannot appear complete before it is, and run something while a server is
 * up (starting it for the moment when it was stopped).
 */
import { access, readdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { handOverIfForeign } from '../../host/tree-owner.js';
import type { EngineEnv, InstanceSpec } from '../engine.js';
import { EngineError } from '../engine.js';
import { binariesFor, type PgBinaries } from './binaries.js';
import { configure, readRole, writeHba, type Role } from './configure.js';
import { run } from './exec.js';
import { writeOwned } from './files.js';
import { layoutOf, layoutOfVolume, removeOutsideSocketDir, type Layout } from './layout.js';
import { livePostmaster } from './postmaster.js';
import { halt, launch } from './process.js';
import { setAppPassword, setSqlReader, withClient } from './sql.js';

const GiB = 1024 ** 3;

/** The volume quota of `inst` in bytes (undefined: none). */
export function quotaOf(inst: InstanceSpec): number | undefined {
  return inst.sizeGb > 0 ? Math.round(inst.sizeGb * GiB) : undefined;
}

async function exists(file: string): Promise<boolean> {
  return access(file).then(
    () => true,
    () => false,
  );
}

/** Stops whatever server runs in `volume` and destroys it (a leftover build, a failed copy). */
export async function discardVolume(env: EngineEnv, volume: string): Promise<void> {
  const info = await env.pool.info(volume);
  if (!info) return;
  const layout = layoutOf(info.path);
  await halt(layout.pgdata, 'immediate');
  await removeOutsideSocketDir(layout);
  await env.pool.destroy(volume);
}

/**
 * Makes a data directory the directory pool just copied durable. The copy (cp) writes
 * through the page cache only; PostgreSQL fsyncs everything itself before any crash
 * recovery, but a copy of a cleanly stopped cluster (a template, a stopped source) starts
 * without one, so a power cut soon after could lose files it never wrote. A btrfs
 * snapshot is committed atomically and needs nothing.
 */
export async function persistCopy(env: EngineEnv, layout: Layout, binDir?: string) {
  if (env.pool.kind === 'btrfs') return;
  const bins = await binariesFor(layout.pgdata, binDir);
  await run(env, path.join(bins.dir, 'initdb'), ['--sync-only', '-D', layout.pgdata]);
}

/** Whether the volume holds a finished data directory (no build marker left by a crash). */
export async function isComplete(layout: Layout): Promise<boolean> {
  return (
    !(await exists(layout.buildingMarker)) && (await exists(path.join(layout.pgdata, 'PG_VERSION')))
  );
}

/**
 * Makes `inst`'s volume with `fill` unless a complete one is there. The volume carries a
 * marker while it is filled, so a volume a crash left half made is found, stopped and
 * destroyed by the next call, which starts over; a failed fill is cleaned up at once.
 */
export async function buildVolume(
  env: EngineEnv,
  inst: InstanceSpec,
  fill: (layout: Layout) => Promise<void>,
): Promise<Layout> {
  const info = await env.pool.info(inst.volume);
  if (info) {
    const layout = layoutOf(info.path);
    if (await isComplete(layout)) return layout;
    await discardVolume(env, inst.volume);
  }
  const owner = { uid: env.user.uid, gid: env.user.gid };
  const volume = await env.pool.create(inst.volume, { owner, quotaBytes: quotaOf(inst) });
  const layout = layoutOf(volume.path);
  try {
    await writeOwned(env.user, layout.buildingMarker, '');
    await fill(layout);
    await rm(layout.buildingMarker);
  } catch (err) {
    await discardVolume(env, inst.volume).catch(() => undefined);
    throw err;
  }
  return layout;
}

/** Empties the socket directory of a stopped server (a copy brings its source's lock files). */
async function clearSockets(layout: Layout): Promise<void> {
  for (const entry of await readdir(layout.socketDir).catch(() => [])) {
    await rm(path.join(layout.socketDir, entry), { force: true });
  }
}

/**
 * Starts the server in `layout` as `role` (configuring it first) unless it runs already,
 * and waits until it is up. Returns its binaries.
 */
export async function bringUp(
  env: EngineEnv,
  inst: InstanceSpec,
  layout: Layout,
  role: Role,
  opts: { binDir?: string; timeoutMs?: number } = {},
): Promise<PgBinaries> {
  const bins = await binariesFor(layout.pgdata, opts.binDir);
  if (!(await livePostmaster(layout.pgdata))) {
    // A copy a crash interrupted before its hand-over, or a volume of an older pier whose
    // servers all ran as one user: the server must own its files, and only it.
    await handOverIfForeign(layout.root, env.user);
    await clearSockets(layout);
    await configure(env, bins, inst, layout, role);
  }
  await launch(env, bins, layout, { timeoutMs: opts.timeoutMs });
  return bins;
}

/**
 * Starts a primary and sets the customer's password: the end of every make. A copy passes
 * a fresh `{ kind: 'primary' }` (its source's role, say a synchronous standby's name, must
 * not carry over); provision keeps the role the volume records.
 */
export async function bringUpPrimary(
  env: EngineEnv,
  inst: InstanceSpec,
  layout: Layout,
  opts: { role?: Role; binDir?: string } = {},
): Promise<void> {
  const recorded = await readRole(layout);
  const role = opts.role ?? (recorded.kind === 'primary' ? recorded : { kind: 'primary' });
  await bringUp(env, inst, layout, role, { binDir: opts.binDir });
  await setAppPassword(layout, inst.internalPort, inst.password);
}

/**
 * The SQL reader of a running primary made before it existed: pg_hba.conf as pier writes
 * it now (with the reader's login), reloaded, and the role itself.
 */
export async function prepareSqlReader(env: EngineEnv, inst: InstanceSpec): Promise<void> {
  const layout = await existingLayout(env, inst);
  await writeHba(env, layout);
  await withClient(layout, inst.internalPort, (c) => c.query('SELECT pg_reload_conf()'));
  await setSqlReader(layout, inst.internalPort, inst.password);
}

/** The layout of an existing, complete instance volume. */
export async function existingLayout(env: EngineEnv, inst: InstanceSpec): Promise<Layout> {
  const layout = await layoutOfVolume(env, inst.volume);
  if (!(await isComplete(layout))) {
    throw new EngineError(
      'failed',
      `the volume ${inst.volume} is incomplete (a copy was interrupted); run the operation that made it again`,
    );
  }
  return layout;
}

/** Starts `inst` from its recorded role unless it runs. */
export async function startInstance(
  env: EngineEnv,
  inst: InstanceSpec,
  binDir?: string,
): Promise<Layout> {
  const layout = await existingLayout(env, inst);
  await bringUp(env, inst, layout, await readRole(layout), { binDir });
  return layout;
}

/**
 * Runs `fn` while `inst` is up: a running server is used as it is; a stopped one is
 * started for the moment and stopped again afterwards, leaving it as it was found.
 */
export async function whileRunning<T>(
  env: EngineEnv,
  inst: InstanceSpec,
  fn: (layout: Layout) => Promise<T>,
  binDir?: string,
): Promise<T> {
  const layout = await existingLayout(env, inst);
  const wasRunning = (await livePostmaster(layout.pgdata)) !== undefined;
  if (!wasRunning) await bringUp(env, inst, layout, await readRole(layout), { binDir });
  try {
    return await fn(layout);
  } finally {
    if (!wasRunning) await halt(layout.pgdata, 'fast');
  }
}
