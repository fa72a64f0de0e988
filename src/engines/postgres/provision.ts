/**
 * A new database: a snapshot of the template for its locale (instant on btrfs, a copy of
 * a few tens of MB on a directory pool), configured, started, and given its password.
 */
import { handOverTree } from '../../host/tree-owner.js';
import type { EngineEnv, InstanceSpec } from '../engine.js';
import { bringUpPrimary, persistCopy, quotaOf } from './instance.js';
import { layoutOf } from './layout.js';
import { normalizeLocale } from './locale.js';
import type { Templates } from './template.js';

/** Makes, configures and starts `inst` (each step finds itself done on a rerun). */
export async function provisionInstance(
  env: EngineEnv,
  templates: Templates,
  inst: InstanceSpec,
  locale: string | undefined,
  binDir?: string,
): Promise<void> {
  const normalized = locale === undefined ? undefined : normalizeLocale(locale);
  // The snapshot appears whole or not at all, so an existing volume is a finished copy.
  let volume = await env.pool.info(inst.volume);
  if (!volume) {
    const template = await templates.ensure(env, normalized);
    volume = await env.pool.snapshot(template, inst.volume, { quotaBytes: quotaOf(inst) });
    // The template's files become this database's identity's (bringUp redoes it after a crash).
    await handOverTree(volume.path, env.user);
    await persistCopy(env, layoutOf(volume.path), binDir);
  }
  await bringUpPrimary(env, inst, layoutOf(volume.path), { binDir });
}
