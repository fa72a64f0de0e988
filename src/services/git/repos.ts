/**
 * Where pushes land: one bare repository per app, `DATA_DIR/builds/git/<app id>.git`,
 * beside the app's sources and build logs, named by the app's id (a name can be taken
 * again by another organization once the app is deleted; an id never is). pier's hooks
 * live apart, in `DATA_DIR/builds/git-hooks`, and no repository has hooks of its own.
 */
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { ensureBareRepo, type PushPolicy } from '../../runtime/git/git.js';
import { installHooks } from '../../runtime/git/hook.js';
import type { ServiceContext } from '../context.js';

const MIB = 1024 * 1024;

function gitRoot(ctx: ServiceContext): string {
  return path.join(ctx.config.dataDir, 'builds', 'git');
}

/** The app's repository (whether it exists or not). */
export function appRepo(ctx: ServiceContext, appId: string): string {
  // Ids are pier's (`app-<base62>`); the check keeps a path from ever being made of anything else.
  if (!/^[a-z0-9-]+$/.test(appId)) throw new Error(`not an app id: ${appId}`);
  return path.join(gitRoot(ctx), `${appId}.git`);
}

/**
 * The push policy: a push's pack may be as large as a source archive may be (the
 * operator's `PIER_BUILD_SOURCE_MAX_MB`), and the hooks are pier's.
 */
export async function pushPolicy(ctx: ServiceContext): Promise<PushPolicy> {
  return {
    maxInputBytes: Math.floor(ctx.config.buildSourceMaxMb * MIB),
    hooksDir: await installHooks(path.join(ctx.config.dataDir, 'builds', 'git-hooks')),
  };
}

/** The app's repository, made on its first push. */
export async function openAppRepo(ctx: ServiceContext, appId: string): Promise<string> {
  const dir = appRepo(ctx, appId);
  await ensureBareRepo(dir);
  return dir;
}

/** Removes the app's repository (the app is deleted). */
export async function removeAppRepo(ctx: ServiceContext, appId: string): Promise<void> {
  await rm(appRepo(ctx, appId), { recursive: true, force: true });
}
