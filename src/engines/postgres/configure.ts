/**
 * Writes a server's configuration from what it is: its spec, its role and the platform's
 * TLS material. pier.conf (included last by postgresql.conf), pg_hba.conf and the TLS
 * files are rewritten whole every time, and postgresql.auto.conf is emptied, so a copy
 * never keeps anything of its source (port, archive, standby names) by accident.
 */
import { readFile, rm } from 'node:fs/promises';
import path from 'node:path';
import type { EngineEnv, InstanceSpec } from '../engine.js';
import { EngineError } from '../engine.js';
import { ensureArchive, findArchive } from './archive-volume.js';
import type { PgBinaries } from './binaries.js';
import { readText, writeOwned } from './files.js';
import { ensurePrivateDir, type Layout } from './layout.js';
import { renderHba, renderSettings, type SettingsInput } from './settings.js';

/** What a server is for; kept in the volume so start() can write its configuration again. */
export type Role =
  | { kind: 'primary'; syncStandby?: string }
  | { kind: 'standby'; upstream: { socketDir: string; port: number }; minConnections?: number }
  | {
      kind: 'recovering';
      archiveId: string;
      targetTime?: string;
      /** The server's own copy of the archive's WAL (replay-wal.ts), read instead of it. */
      walDir?: string;
    };

const INCLUDE = "include = 'pier.conf'";
/** Ids name the server in cluster_name, application_name and synchronous_standby_names. */
const ID = /^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$/;

/** Throws unless `inst` can be written into a configuration safely. */
export function checkSpec(inst: InstanceSpec): void {
  const port = inst.internalPort;
  if (!ID.test(inst.id))
    throw new EngineError('failed', `invalid instance id ${JSON.stringify(inst.id)}`);
  if (!Number.isInteger(port) || port < 1 || port > 65535) {
    throw new EngineError('failed', `invalid internal port ${port} for ${inst.id}`);
  }
  if (!(inst.memoryMb > 0) || !(inst.sizeGb >= 0)) {
    throw new EngineError('failed', `invalid memory or size for ${inst.id}`);
  }
}

/** The role recorded in the volume (a primary when none is). */
export async function readRole(layout: Layout): Promise<Role> {
  const text = await readText(layout.roleFile);
  if (!text) return { kind: 'primary' };
  return JSON.parse(text) as Role;
}

/**
 * Writes the whole configuration of the server in `layout` for `inst` playing `role`,
 * making the archive volume when `inst` has one. Does not start or reload the server.
 */
export async function configure(
  env: EngineEnv,
  bins: PgBinaries,
  inst: InstanceSpec,
  layout: Layout,
  role: Role,
): Promise<void> {
  checkSpec(inst);
  await ensurePrivateDir(env, layout.socketDir);
  const archive = inst.archive ? await ensureArchive(env, inst.archive) : undefined;
  let restoreFrom: string | undefined;
  if (role.kind === 'recovering' && role.walDir) {
    restoreFrom = role.walDir;
  } else if (role.kind === 'recovering') {
    const source = await findArchive(env, { id: role.archiveId });
    if (!source) throw new EngineError('failed', `the archive ${role.archiveId} does not exist`);
    restoreFrom = source.wal;
  } else if (role.kind === 'standby' && archive) {
    // The primary ships to the same archive: a standby that fell behind catches up from it.
    restoreFrom = archive.wal;
  }
  const input: SettingsInput = {
    id: inst.id,
    port: inst.internalPort,
    socketDir: layout.socketDir,
    listen: true,
    memoryMb: inst.memoryMb,
    sizeGb: inst.sizeGb,
    archive: archive
      ? { dir: archive.wal, library: bins.basicArchive, timeoutS: inst.flushIntervalS }
      : undefined,
    restoreFrom,
    // A restore replays with no connections at all: nobody may read a half-restored state.
    hotStandby: role.kind !== 'recovering',
    recoveryTarget:
      role.kind === 'recovering' && role.targetTime ? new Date(role.targetTime) : undefined,
    upstream: role.kind === 'standby' ? { ...role.upstream, applicationName: inst.id } : undefined,
    minConnections: role.kind === 'standby' ? role.minConnections : undefined,
    syncStandby: role.kind === 'primary' ? role.syncStandby : undefined,
  };
  await writeOwned(env.user, layout.roleFile, `${JSON.stringify(role)}\n`);
  await writeServerFiles(env, layout, renderSettings(input));
  await installTls(env, layout);
  await setSignals(env, layout, role);
}

/** pier.conf, pg_hba.conf, an empty postgresql.auto.conf and the include of pier.conf. */
export async function writeServerFiles(
  env: EngineEnv,
  layout: Layout,
  settings: string,
): Promise<void> {
  const conf = path.join(layout.pgdata, 'postgresql.conf');
  const text = await readText(conf);
  if (text === undefined) throw new EngineError('failed', `${conf} is missing`);
  if (!text.split('\n').includes(INCLUDE)) {
    await writeOwned(env.user, conf, `${text.replace(/\n?$/, '\n')}${INCLUDE}\n`);
  }
  await writeOwned(env.user, path.join(layout.pgdata, 'pier.conf'), settings);
  await writeHba(env, layout);
  await writeOwned(
    env.user,
    path.join(layout.pgdata, 'postgresql.auto.conf'),
    '# Not used: pier writes pier.conf instead (ALTER SYSTEM is for superusers only).\n',
  );
}

/** pg_hba.conf as pier writes it (settings.ts); a running server reads it on reload. */
export async function writeHba(env: EngineEnv, layout: Layout): Promise<void> {
  await writeOwned(env.user, path.join(layout.pgdata, 'pg_hba.conf'), renderHba());
}

/** Copies the platform's certificate, key and CA into the data directory (0600, service user). */
export async function installTls(env: EngineEnv, layout: Layout): Promise<void> {
  const files: [string, string][] = [
    [env.tls.certFile, 'server.crt'],
    [env.tls.keyFile, 'server.key'],
    [env.tls.caFile, 'root.crt'],
  ];
  for (const [from, name] of files) {
    await writeOwned(env.user, path.join(layout.pgdata, name), await readFile(from));
  }
}

async function setSignals(env: EngineEnv, layout: Layout, role: Role): Promise<void> {
  const standby = path.join(layout.pgdata, 'standby.signal');
  const recovery = path.join(layout.pgdata, 'recovery.signal');
  const want = role.kind === 'standby' ? standby : role.kind === 'recovering' ? recovery : '';
  for (const file of [standby, recovery]) {
    if (file === want) await writeOwned(env.user, file, '');
    else await rm(file, { force: true });
  }
}
