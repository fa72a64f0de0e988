/**
 * A branch: a copy of a database as it is now, run as an independent server. On btrfs a
 * subvolume snapshot is atomic, so a snapshot of a running server is exactly what a power
 * cut would have left, and crash recovery makes it consistent. A plain directory copy of a
 * running server is not consistent (files are copied at different moments), so there the
 * copy is a base backup streamed from the running source; a stopped source is copied.
 */
import { handOverTree } from '../../host/tree-owner.js';
import type { EngineEnv, InstanceSpec } from '../engine.js';
import { basebackup } from './archive.js';
import { binariesFor } from './binaries.js';
import { writeOwned } from './files.js';
import {
  bringUpPrimary,
  persistCopy,
  buildVolume,
  discardVolume,
  existingLayout,
  isComplete,
  quotaOf,
} from './instance.js';
import { layoutOf } from './layout.js';
import { livePostmaster, readPidFile } from './postmaster.js';
import { withClient } from './sql.js';

/** Copies `source` as it is now into `target`'s volume and starts it with `target`'s settings. */
export async function branchInstance(
  env: EngineEnv,
  source: InstanceSpec,
  target: InstanceSpec,
  binDir?: string,
): Promise<void> {
  const existing = await env.pool.info(target.volume);
  if (!existing || !(await isComplete(layoutOf(existing.path)))) {
    const src = await existingLayout(env, source);
    const running = await livePostmaster(src.pgdata);
    if (env.pool.kind === 'btrfs' || !running) {
      if (running) {
        // A checkpoint first: the copy's crash recovery then replays only what is written
        // from here on, rather than everything since the last scheduled checkpoint (after
        // a bulk load, gigabytes), which makes a branch's time independent of recent writes.
        const port = (await readPidFile(src.pgdata))?.port ?? source.internalPort;
        await withClient(src, port, (c) => c.query('CHECKPOINT'));
      }
      if (existing) await discardVolume(env, target.volume);
      const copy = await env.pool.snapshot(source.volume, target.volume, {
        quotaBytes: quotaOf(target),
      });
      // The source's files become the branch's identity's; its server cannot read the source's.
      await handOverTree(copy.path, env.user);
      // The source's log is not the branch's history.
      await writeOwned(env.user, layoutOf(copy.path).logFile, '');
      await persistCopy(env, layoutOf(copy.path), binDir);
    } else {
      const bins = await binariesFor(src.pgdata, binDir);
      const port = (await readPidFile(src.pgdata))?.port ?? source.internalPort;
      await buildVolume(env, target, async (layout) => {
        // As root: the branch's identity cannot reach the source's socket. Handed over after.
        await basebackup(env, bins.dir, src, port, layout.pgdata, { asRoot: true });
        await handOverTree(layout.pgdata, env.user);
        await writeOwned(env.user, layout.logFile, '');
      });
    }
  }
  // configure() (inside) writes the target's port, archive and TLS over the source's,
  // empties postgresql.auto.conf and drops standby.signal; a postmaster.pid copied from
  // the running source is set aside at start, as its pid is not working in this directory.
  const layout = layoutOf((await env.pool.info(target.volume))!.path);
  await bringUpPrimary(env, target, layout, { role: { kind: 'primary' }, binDir });
}
