/**
 * Writing and reading an archive: base backups (pg_basebackup over the private socket),
 * making sure everything committed has been shipped (flush), and which moments the
 * archive can reach.
 */
import { access, readdir, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ArchiveRange, ArchiveRef, EngineEnv, InstanceSpec } from '../engine.js';
import { EngineError } from '../engine.js';
import { ensureArchive, findArchive, type ArchivePaths } from './archive-volume.js';
import { binariesFor } from './binaries.js';
import { readText, syncDir, writeOwned } from './files.js';
import { run } from './exec.js';
import { whileRunning } from './instance.js';
import type { Layout } from './layout.js';
import { SUPERUSER } from './settings.js';
import { withClient } from './sql.js';

/** What pier records beside each complete base backup (`base/<label>.json`). */
export interface BaseManifest {
  label: string;
  timeline: number;
  startLsn: string;
  endLsn: string;
  /** A moment at or after the backup became consistent: the earliest it can restore to. */
  consistentAt: string;
  pgMajor: number;
}

function needArchive(inst: InstanceSpec) {
  if (!inst.archive) throw new EngineError('failed', `the instance ${inst.id} has no archive`);
  return inst.archive;
}

/** A copy of the data directory of `layout` into `dir` by pg_basebackup, WAL included. */
export async function basebackup(
  env: EngineEnv,
  binDir: string,
  layout: Layout,
  port: number,
  dir: string,
  opts: { asRoot?: boolean } = {},
): Promise<void> {
  await run(
    env,
    path.join(binDir, 'pg_basebackup'),
    [
      ...['-D', dir, '-X', 'stream', '-c', 'fast', '--no-password'],
      ...['-h', layout.socketDir, '-p', String(port), '-U', SUPERUSER],
    ],
    opts,
  );
}

/** Takes a base backup of `inst` into its archive; leftovers of interrupted ones go first. */
export async function takeBaseBackup(
  env: EngineEnv,
  inst: InstanceSpec,
  binDir?: string,
): Promise<BaseManifest> {
  const archive = await ensureArchive(env, needArchive(inst));
  await clearIncompleteBases(archive);
  return whileRunning(
    env,
    inst,
    async (layout) => {
      const bins = await binariesFor(layout.pgdata, binDir);
      const label = await freeLabel(archive);
      const partial = path.join(archive.base, `${label}.partial`);
      await basebackup(env, bins.dir, layout, inst.internalPort, partial);
      // Taken after the backup ended, so every commit later than this is after its end LSN.
      const consistentAt = await withClient(layout, inst.internalPort, async (c) => {
        const { rows } = await c.query<{ t: Date }>('SELECT clock_timestamp() AS t');
        return rows[0]!.t;
      });
      const wal = await walRange(partial);
      // The commit points: the complete copy under its label, then its manifest.
      await rename(partial, path.join(archive.base, label));
      await syncDir(archive.base);
      const manifest: BaseManifest = {
        label,
        ...wal,
        consistentAt: consistentAt.toISOString(),
        pgMajor: bins.major,
      };
      await writeOwned(
        env.user,
        path.join(archive.base, `${label}.json`),
        `${JSON.stringify(manifest, null, 2)}\n`,
        { durable: true },
      );
      return manifest;
    },
    binDir,
  );
}

/** The WAL range of a backup, from the backup_manifest pg_basebackup wrote. */
async function walRange(
  dir: string,
): Promise<Pick<BaseManifest, 'timeline' | 'startLsn' | 'endLsn'>> {
  const text = await readText(path.join(dir, 'backup_manifest'));
  if (!text) throw new EngineError('failed', `${dir} has no backup_manifest`);
  const manifest = JSON.parse(text) as {
    'WAL-Ranges'?: { Timeline: number; 'Start-LSN': string; 'End-LSN': string }[];
  };
  const ranges = manifest['WAL-Ranges'] ?? [];
  const first = ranges[0];
  const last = ranges[ranges.length - 1];
  if (!first || !last) throw new EngineError('failed', `${dir}/backup_manifest has no WAL range`);
  return { timeline: last.Timeline, startLsn: first['Start-LSN'], endLsn: last['End-LSN'] };
}

async function freeLabel(archive: ArchivePaths): Promise<string> {
  const base = new Date().toISOString().replace(/[-:.]/g, '');
  for (let i = 0; ; i++) {
    const label = i === 0 ? base : `${base}-${i}`;
    const taken = await access(path.join(archive.base, label)).then(
      () => true,
      () => false,
    );
    if (!taken) return label;
  }
}

/** Removes base backups a crash left unfinished: `.partial` copies and bases without manifest. */
async function clearIncompleteBases(archive: ArchivePaths): Promise<void> {
  const entries = await readdir(archive.base);
  for (const entry of entries) {
    // Kept: a label directory with its manifest, and that manifest. Anything else
    // (`<label>.partial`, a label without manifest, a manifest's `.tmp`) is a leftover.
    const keep = entry.endsWith('.json')
      ? entries.includes(entry.slice(0, -'.json'.length))
      : !entry.includes('.') && entries.includes(`${entry}.json`);
    if (!keep) await rm(path.join(archive.base, entry), { recursive: true, force: true });
  }
}

/** The complete base backups of an archive, oldest first. */
export async function listBases(archive: ArchivePaths): Promise<BaseManifest[]> {
  const entries = await readdir(archive.base).catch(() => [] as string[]);
  const bases: BaseManifest[] = [];
  for (const entry of entries) {
    if (!entry.endsWith('.json') || !entries.includes(entry.slice(0, -5))) continue;
    const text = await readText(path.join(archive.base, entry)).catch(() => undefined);
    if (text) bases.push(JSON.parse(text) as BaseManifest);
  }
  return bases.sort((a, b) => a.consistentAt.localeCompare(b.consistentAt));
}

/**
 * Ships everything committed so far: a transaction with an xid commits (so the archive
 * holds a commit later than now, where a restore to now can stop), the WAL segment is
 * switched, and we wait until that segment is in the archive.
 */
export async function flush(
  env: EngineEnv,
  inst: InstanceSpec,
  opts: { binDir?: string; timeoutMs?: number } = {},
): Promise<void> {
  if (!inst.archive) return;
  const archive = await ensureArchive(env, inst.archive);
  await whileRunning(
    env,
    inst,
    async (layout) => {
      const segment = await withClient(layout, inst.internalPort, async (c) => {
        await c.query('BEGIN');
        // Not waiting for a synchronous standby: this commit carries no data to protect.
        await c.query('SET LOCAL synchronous_commit = local');
        await c.query('SELECT pg_current_xact_id()');
        await c.query('COMMIT');
        const { rows } = await c.query<{ f: string }>(
          'SELECT pg_walfile_name(pg_switch_wal()) AS f',
        );
        return rows[0]!.f;
      });
      await waitArchived(layout, inst.internalPort, archive, segment, opts.timeoutMs ?? 120_000);
    },
    opts.binDir,
  );
}

async function waitArchived(
  layout: Layout,
  port: number,
  archive: ArchivePaths,
  segment: string,
  timeoutMs: number,
): Promise<void> {
  const file = path.join(archive.wal, segment);
  const deadline = Date.now() + timeoutMs;
  while (
    !(await stat(file).then(
      () => true,
      () => false,
    ))
  ) {
    if (Date.now() > deadline) {
      const failed = await withClient(layout, port, async (c) => {
        const { rows } = await c.query<{ w: string | null; t: Date | null }>(
          'SELECT last_failed_wal AS w, last_failed_time AS t FROM pg_stat_archiver',
        );
        return rows[0];
      }).catch(() => undefined);
      const why = failed?.w
        ? ` (archiving ${failed.w} last failed at ${failed.t?.toISOString()})`
        : '';
      throw new EngineError('failed', `WAL segment ${segment} was not archived in time${why}`);
    }
    await sleep(10);
  }
}

/** The moments `archive` can restore. */
export async function range(env: EngineEnv, archive: ArchiveRef): Promise<ArchiveRange> {
  const paths = await findArchive(env, archive);
  const now = new Date();
  if (!paths) return { newest: now };
  const bases = await listBases(paths);
  const oldest = bases[0] ? new Date(bases[0].consistentAt) : undefined;
  // While the writing instance exists, a flush makes everything up to now reachable.
  if (archive.sourceVolume && (await env.pool.info(archive.sourceVolume))) {
    return { oldest, newest: now };
  }
  // Else the last segment shipped is how far it reaches.
  let newest = bases.length > 0 ? new Date(bases[bases.length - 1]!.consistentAt) : new Date(0);
  for (const entry of await readdir(paths.wal).catch(() => [] as string[])) {
    if (entry.startsWith('.')) continue;
    const st = await stat(path.join(paths.wal, entry)).catch(() => undefined);
    if (st && st.mtime > newest) newest = st.mtime;
  }
  return { oldest, newest: newest.getTime() === 0 ? now : newest };
}

/** A WAL file of the archive: a segment, a promoted standby's `.partial`, a backup's `.backup`. */
const WAL_FILE = /^[0-9A-F]{8}([0-9A-F]{16})(\.partial|\.[0-9A-F]{8}\.backup)?$/;

/** Whether `entry` of a WAL directory is a WAL file older than `segment` (24 hex digits). */
export function isWalBefore(entry: string, segment: string): boolean {
  const m = WAL_FILE.exec(entry);
  return !!m && m[1]! < segment.slice(8);
}

/** The WAL segment a base backup starts in, from the `backup_label` pg_basebackup wrote. */
export async function startSegment(
  archive: ArchivePaths,
  base: BaseManifest,
): Promise<string | undefined> {
  const text = await readText(path.join(archive.base, base.label, 'backup_label'));
  return text ? /^START WAL LOCATION: \S+ \(file ([0-9A-F]{24})\)/m.exec(text)?.[1] : undefined;
}

/**
 * Removes what only restores to moments before `before` read: the base backups older
 * than the newest one consistent at or before `before` (the one a restore to `before`
 * starts from), then the WAL segments older than that base's start. Every restore to a
 * moment from `before` on starts from that base or a newer one and replays WAL from its
 * start, so all of it stays. Timeline history files stay (tiny, and recovery reads them).
 * Bases go manifest first, so a crash halfway leaves no listed base without its files,
 * and the WAL goes only after the bases that need it. Idempotent.
 */
export async function prune(env: EngineEnv, archive: ArchiveRef, before: Date): Promise<void> {
  const paths = await findArchive(env, archive);
  if (!paths) return;
  const bases = await listBases(paths);
  const keepAt = bases.findLastIndex((b) => new Date(b.consistentAt) <= before);
  if (keepAt < 0) return; // no base is that old: nothing before `before` can go yet
  const kept = bases[keepAt]!;
  // Found before anything is removed: without it no WAL is removed at all.
  const walStart = await startSegment(paths, kept);
  for (const old of bases.slice(0, keepAt)) {
    await rm(path.join(paths.base, `${old.label}.json`), { force: true });
    await syncDir(paths.base);
    await rm(path.join(paths.base, old.label), { recursive: true, force: true });
  }
  if (!walStart) {
    env.log.warn({ archive: archive.id, base: kept.label }, 'base has no backup_label: WAL kept');
    return;
  }
  let removed = 0;
  for (const entry of await readdir(paths.wal).catch(() => [] as string[])) {
    if (!isWalBefore(entry, walStart)) continue;
    await rm(path.join(paths.wal, entry), { force: true });
    removed++;
  }
  if (removed > 0) await syncDir(paths.wal);
  env.log.info(
    { archive: archive.id, before, base: kept.label, bases: keepAt, wal: removed },
    'archive pruned',
  );
}
