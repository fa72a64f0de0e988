/**
 * A synchronous streaming standby: a base backup of the running primary, started with
 * standby.signal and a primary_conninfo naming itself (application_name = its id), which
 * the primary then lists in synchronous_standby_names. From then on a commit returns only
 * once the standby has flushed it, so losing the primary loses no committed row.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { EngineEnv, InstanceSpec } from '../engine.js';
import { EngineError } from '../engine.js';
import { basebackup } from './archive.js';
import { binariesFor } from './binaries.js';
import { configure, readRole, type Role } from './configure.js';
import { bringUp, buildVolume, existingLayout, startInstance } from './instance.js';
import type { Layout } from './layout.js';
import { livePostmaster } from './postmaster.js';
import { launch } from './process.js';
import { memorySettings } from './settings.js';
import { setAppPassword, withClient } from './sql.js';

const REPLICATION_TIMEOUT_MS = 120_000;

/** Builds `standby` from the running `primary`, starts it, and makes the primary wait for it. */
export async function createStandby(
  env: EngineEnv,
  primary: InstanceSpec,
  standby: InstanceSpec,
  binDir?: string,
): Promise<void> {
  const source = await startInstance(env, primary, binDir);
  const bins = await binariesFor(source.pgdata, binDir);
  const role: Role = {
    kind: 'standby',
    upstream: { socketDir: source.socketDir, port: primary.internalPort },
    // Hot standby refuses to replay WAL of a primary allowing more connections than itself.
    minConnections: memorySettings(primary.memoryMb).maxConnections,
  };
  const layout = await buildVolume(env, standby, async (l) => {
    await basebackup(env, bins.dir, source, primary.internalPort, l.pgdata);
    await configure(env, bins, standby, l, role);
    await launch(env, bins, l);
  });
  await bringUp(env, standby, layout, role, { binDir });
  await waitReplication(source, primary.internalPort, standby.id, ['streaming'], undefined);

  const primaryRole = await readRole(source);
  if (primaryRole.kind !== 'primary' || primaryRole.syncStandby !== standby.id) {
    await configure(env, bins, primary, source, { kind: 'primary', syncStandby: standby.id });
  }
  // Reloaded on every call: a crash between writing the file and the reload is healed.
  await withClient(source, primary.internalPort, (c) => c.query('SELECT pg_reload_conf()'));
  await waitReplication(source, primary.internalPort, standby.id, ['streaming'], 'sync');
}

/** Waits until the primary sees `name` streaming (and, with `sync`, as its synchronous standby). */
async function waitReplication(
  primary: Layout,
  port: number,
  name: string,
  states: string[],
  sync: string | undefined,
): Promise<void> {
  const deadline = Date.now() + REPLICATION_TIMEOUT_MS;
  let seen = 'not connected';
  while (Date.now() < deadline) {
    const row = await withClient(primary, port, async (c) => {
      const { rows } = await c.query<{ state: string; sync_state: string }>(
        'SELECT state, sync_state FROM pg_stat_replication WHERE application_name = $1',
        [name],
      );
      return rows[0];
    });
    if (row && states.includes(row.state) && (!sync || row.sync_state === sync)) return;
    if (row) seen = `${row.state}, ${row.sync_state}`;
    await sleep(20);
  }
  throw new EngineError(
    'failed',
    `the standby ${name} did not start replicating in time (${seen})`,
  );
}

/**
 * Promotes `standby` and waits until it accepts writes. The new primary waits for no
 * standby (synchronous_standby_names empty: with one named and none there, every commit
 * would hang), and gets `standby.password`.
 */
export async function promoteStandby(
  env: EngineEnv,
  standby: InstanceSpec,
  binDir?: string,
): Promise<void> {
  const layout = await startInstance(env, standby, binDir);
  const bins = await binariesFor(layout.pgdata, binDir);
  const port = standby.internalPort;
  const inRecovery = async () =>
    withClient(layout, port, async (c) => {
      const { rows } = await c.query<{ r: boolean }>('SELECT pg_is_in_recovery() AS r');
      return rows[0]!.r;
    });
  if (await inRecovery()) {
    const promoted = await withClient(layout, port, async (c) => {
      const { rows } = await c.query<{ ok: boolean }>('SELECT pg_promote(true, 300) AS ok');
      return rows[0]!.ok;
    });
    if (!promoted || (await inRecovery())) {
      throw new EngineError('failed', `the standby ${standby.id} did not finish its promotion`);
    }
  }
  await configure(env, bins, standby, layout, { kind: 'primary' });
  await withClient(layout, port, (c) => c.query('SELECT pg_reload_conf()'));
  await launch(env, bins, layout);
  await setAppPassword(layout, port, standby.password);
}

/**
 * Makes `primary` wait for no standby any more (its standby is lost or being replaced).
 * The reload also releases commits that were already waiting; we wait until new sessions
 * see the change, so a commit right after this call does not hang.
 */
export async function detachStandby(
  env: EngineEnv,
  primary: InstanceSpec,
  binDir?: string,
): Promise<void> {
  const layout = await existingLayout(env, primary);
  const role = await readRole(layout);
  if (role.kind !== 'primary') return;
  if (role.syncStandby) {
    await configure(env, await binariesFor(layout.pgdata, binDir), primary, layout, {
      kind: 'primary',
    });
  }
  // Reloaded on every call: a crash between writing the file and the reload is healed.
  if (!(await livePostmaster(layout.pgdata))) return;
  const port = primary.internalPort;
  await withClient(layout, port, (c) => c.query('SELECT pg_reload_conf()'));
  const deadline = Date.now() + REPLICATION_TIMEOUT_MS;
  for (;;) {
    const names = await withClient(layout, port, async (c) => {
      const { rows } = await c.query<{ s: string }>(
        `SELECT current_setting('synchronous_standby_names') AS s`,
      );
      return rows[0]!.s;
    });
    if (names === '') return;
    if (Date.now() > deadline) {
      throw new EngineError('failed', `${primary.id} still waits for its standby (${names})`);
    }
    await sleep(10);
  }
}
