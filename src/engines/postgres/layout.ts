/**
 * Where things live inside an instance's volume. Everything of one server is under its
 * volume, so destroying the volume leaves nothing behind, with one exception: a socket
 * directory that would overflow sun_path moves to a short private directory under /tmp.
 */
import { createHash } from 'node:crypto';
import { lstat, mkdir, rm } from 'node:fs/promises';
import path from 'node:path';
import type { EngineEnv } from '../engine.js';
import { EngineError } from '../engine.js';
import { ownDir } from './files.js';

// sun_path holds 108 bytes including the NUL; PostgreSQL appends "/.s.PGSQL.65535".
const MAX_SOCKET_DIR = 90;

/** Paths of one server's files; all derived from the volume's path. */
export interface Layout {
  /** The volume's top directory (0700, service user). */
  root: string;
  /** The data directory. */
  pgdata: string;
  /** Private directory of the Unix socket (0700): only the platform reaches the server here. */
  socketDir: string;
  /** Where the server's stderr goes. */
  logFile: string;
  /** Which role the server plays (primary, standby, recovering); read by start(). */
  roleFile: string;
  /** Present while a copy (restore, basebackup) is being built; a crash leaves it behind. */
  buildingMarker: string;
}

/** The layout of the volume at `root`. */
export function layoutOf(root: string): Layout {
  return {
    root,
    pgdata: path.join(root, 'pgdata'),
    socketDir: socketDirFor(root),
    logFile: path.join(root, 'postgres.log'),
    roleFile: path.join(root, 'role.json'),
    buildingMarker: path.join(root, '.building'),
  };
}

/** The layout of `volume`, which must exist. */
export async function layoutOfVolume(env: EngineEnv, volume: string): Promise<Layout> {
  const info = await env.pool.info(volume);
  if (!info) throw new EngineError('failed', `the volume ${volume} does not exist`);
  return layoutOf(info.path);
}

/**
 * The layout `volume` has or would have: volumes sit at `<pool root>/<name>` in both pool
 * kinds, which is what lets destroy clean a /tmp socket directory after the volume is gone.
 */
export function expectedLayout(env: EngineEnv, volume: string): Layout {
  return layoutOf(path.join(env.pool.root, volume));
}

function socketDirFor(root: string): string {
  const own = path.join(root, 'run');
  if (own.length <= MAX_SOCKET_DIR) return own;
  const digest = createHash('sha256').update(root).digest('hex').slice(0, 16);
  return `/tmp/pier-pg-${digest}`;
}

/** Whether the socket directory lives outside the volume (and must be removed on its own). */
export function socketDirIsOutside(layout: Layout): boolean {
  return !layout.socketDir.startsWith(`${layout.root}/`);
}

/**
 * Makes `dir` a 0700 directory owned by the service user. Under /tmp anyone can create a
 * name first, so an existing entry must be a real directory that the service user owns.
 */
export async function ensurePrivateDir(env: EngineEnv, dir: string): Promise<void> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const st = await lstat(dir);
  if (!st.isDirectory() || (st.uid !== env.user.uid && st.uid !== process.getuid?.())) {
    throw new EngineError('failed', `${dir} exists and is not a private directory of pier`);
  }
  await ownDir(env.user, dir);
}

/** Removes a socket directory under /tmp (inside the volume it goes with the volume). */
export async function removeOutsideSocketDir(layout: Layout): Promise<void> {
  if (socketDirIsOutside(layout)) await rm(layout.socketDir, { recursive: true, force: true });
}
