/**
 * Point-in-time restore: the newest base backup consistent at or before the moment is
 * copied into the target's volume, replayed from the archive up to the last commit at or
 * before that moment, promoted, and then run as a server of its own.
 */
import { rm } from 'node:fs/promises';
import path from 'node:path';
import type { ArchiveRef, EngineEnv, InstanceSpec } from '../engine.js';
import { EngineError } from '../engine.js';
import { listBases, range } from './archive.js';
import { requireArchive } from './archive-volume.js';
import { binariesFor } from './binaries.js';
import { configure, type Role } from './configure.js';
import { copyTree } from './exec.js';
import { bringUp, bringUpPrimary, buildVolume, isComplete } from './instance.js';
import { layoutOf, type Layout } from './layout.js';
import { launch } from './process.js';
import { copyReplayWal, dropReplayWal } from './replay-wal.js';
import { handOverTree } from '../../host/tree-owner.js';

/** How long replay may take before the restore gives up (it can be long on a big archive). */
const REPLAY_TIMEOUT_MS = 6 * 3_600_000;
/** What PostgreSQL says when the archive ends before any commit later than the target. */
const TARGET_NOT_REACHED = 'recovery ended before configured recovery target was reached';

/** Throws 'as-of-out-of-range' unless `archive` can restore `asOf`. */
export async function checkInRange(env: EngineEnv, archive: ArchiveRef, asOf: Date): Promise<void> {
  const r = await range(env, archive);
  const now = new Date();
  if (asOf.getTime() > now.getTime()) {
    throw new EngineError(
      'as-of-out-of-range',
      `${asOf.toISOString()} is in the future; the archive reaches up to ${r.newest.toISOString()}.`,
    );
  }
  if (!r.oldest) {
    throw new EngineError(
      'as-of-out-of-range',
      'The archive has no complete base backup yet, so it cannot restore any moment.',
    );
  }
  if (asOf < r.oldest || asOf > r.newest) {
    throw new EngineError(
      'as-of-out-of-range',
      `${asOf.toISOString()} is outside what the archive can restore: from ` +
        `${r.oldest.toISOString()} to ${r.newest.toISOString()}.`,
    );
  }
}

/** Restores `archive` as of `asOf` into `target`'s volume and starts it as a primary. */
export async function restoreArchive(
  env: EngineEnv,
  archive: ArchiveRef,
  asOf: Date,
  target: InstanceSpec,
  binDir?: string,
): Promise<void> {
  const existing = await env.pool.info(target.volume);
  if (!existing || !(await isComplete(layoutOf(existing.path)))) {
    await checkInRange(env, archive, asOf);
    const paths = await requireArchive(env, archive);
    const base = (await listBases(paths)).filter((b) => new Date(b.consistentAt) <= asOf).pop();
    if (!base)
      throw new EngineError('as-of-out-of-range', `No base backup precedes ${asOf.toISOString()}.`);
    try {
      await buildVolume(env, target, async (layout) => {
        await copyTree(env, path.join(paths.base, base.label), layout.pgdata);
        // The base is the source's identity's; the restored server is the target's.
        await handOverTree(layout.pgdata, env.user);
        await rm(path.join(layout.pgdata, 'backup_manifest'), { force: true });
        const walDir = await copyReplayWal(env, target, paths, base);
        await replay(env, target, layout, { archiveId: archive.id, walDir }, asOf, binDir);
        // Promoted: from here on it is a primary (the settings apply from its next start).
        const bins = await binariesFor(layout.pgdata, binDir);
        await configure(env, bins, target, layout, { kind: 'primary' });
      });
    } finally {
      await dropReplayWal(env, target);
    }
  }
  const layout = layoutOf((await env.pool.info(target.volume))!.path);
  await bringUpPrimary(env, target, layout, { role: { kind: 'primary' }, binDir });
}

/**
 * Replays the archive up to `asOf` and waits for the promotion. When the archive holds no
 * commit later than `asOf` (its writer is gone, so nothing was committed after its end),
 * PostgreSQL refuses to stop short; replaying all of it is then exactly the state at asOf.
 */
async function replay(
  env: EngineEnv,
  target: InstanceSpec,
  layout: Layout,
  from: { archiveId: string; walDir: string },
  asOf: Date,
  binDir?: string,
): Promise<void> {
  const bins = await binariesFor(layout.pgdata, binDir);
  const role: Role = { kind: 'recovering', ...from, targetTime: asOf.toISOString() };
  await configure(env, bins, target, layout, role);
  try {
    await launch(env, bins, layout, { timeoutMs: REPLAY_TIMEOUT_MS });
  } catch (err) {
    if (!(err instanceof EngineError) || !err.message.includes(TARGET_NOT_REACHED)) throw err;
    env.log.info({ target: target.id, asOf }, 'archive ends before a later commit: replaying all');
    await bringUp(
      env,
      target,
      layout,
      { kind: 'recovering', ...from },
      {
        binDir,
        timeoutMs: REPLAY_TIMEOUT_MS,
      },
    );
  }
}
