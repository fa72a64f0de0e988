/**
 * Lays out an instance's volume for a start: the directories with their owners (see
 * paths.ts), the TLS files copied in, the admin password (made once), and redis.conf from
 * the spec. Everything is written again each time, so a rerun after a crash, a renewed
 * certificate or a changed spec all end in the same place.
 */
import { randomBytes } from 'node:crypto';
import { lstat, readdir, readFile, rm } from 'node:fs/promises';
import path from 'node:path';
import type { EngineEnv, InstanceSpec } from '../engine.js';
import { renderConfig } from './config.js';
import { openNoFollow, ownedDir, rootWithGroup, writeAtomic } from './files.js';
import type { RedisPaths } from './paths.js';

/** The admin password of the instance, made on first need and kept in a 0600 root file. */
export async function adminPassword(paths: RedisPaths): Promise<string> {
  const existing = await readSmall(paths.adminPassFile);
  if (existing.length >= 32) return existing;
  const password = randomBytes(32).toString('hex');
  // Root's, not the service user's: the server needs only the digest in its config, so a
  // compromised server cannot learn the platform's password.
  await writeAtomic(paths.adminPassFile, `${password}\n`, 0o600);
  return password;
}

async function readSmall(file: string): Promise<string> {
  try {
    const handle = await openNoFollow(file);
    try {
      return (await handle.readFile('utf8')).trim();
    } finally {
      await handle.close();
    }
  } catch {
    return '';
  }
}

/**
 * The socket's directory: in the volume, or (deep volumes) in a root-owned directory
 * under /tmp, which anything else at that name (a link someone planted) is removed for.
 */
async function socketDirs(paths: RedisPaths, env: EngineEnv): Promise<void> {
  if (paths.socketRoot) {
    const me = process.getuid?.() ?? 0;
    const st = await lstat(paths.socketRoot).catch(() => undefined);
    if (st && (!st.isDirectory() || st.uid !== me)) {
      await rm(paths.socketRoot, { recursive: true, force: true });
    }
    await ownedDir(paths.socketRoot, { uid: me, gid: process.getgid?.() ?? me }, 0o711);
  }
  await ownedDir(paths.socketDir, env.user);
}

/** Writes everything a start needs into the volume at `paths`. */
export async function writeLayout(
  env: EngineEnv,
  inst: InstanceSpec,
  paths: RedisPaths,
): Promise<void> {
  const readable = rootWithGroup(env.user.gid);
  // The top stays root's: the server passes through it but cannot add or swap entries.
  await ownedDir(paths.root, { uid: 0, gid: 0 }, 0o711);
  await ownedDir(paths.dataDir, env.user);
  await socketDirs(paths, env);
  await ownedDir(paths.tlsDir, readable, 0o750);
  const [cert, key, ca] = await Promise.all([
    readFile(env.tls.certFile),
    readFile(env.tls.keyFile),
    readFile(env.tls.caFile),
  ]);
  await writeAtomic(paths.certFile, cert, 0o644, readable);
  await writeAtomic(paths.keyFile, key, 0o640, readable);
  await writeAtomic(paths.caFile, ca, 0o644, readable);
  const conf = renderConfig({
    paths,
    tlsPort: inst.internalPort,
    memoryMb: inst.memoryMb,
    appPassword: inst.password,
    adminPassword: await adminPassword(paths),
    persistent: inst.archive !== undefined,
  });
  await writeAtomic(paths.conf, conf, 0o640, readable);
}

/**
 * Removes what a copy of another instance's volume brought along that is not data: its
 * pidfile, log, admin password, config, socket, marker, and temporary files of a save or
 * rewrite that was running when the copy was taken.
 */
export async function clearCopiedState(paths: RedisPaths): Promise<void> {
  for (const p of [paths.pidFile, paths.logFile, paths.adminPassFile, paths.marker, paths.conf]) {
    await rm(p, { force: true });
  }
  if (!paths.socketRoot) await rm(paths.socketDir, { recursive: true, force: true });
  for (const dir of [paths.dataDir, paths.aofDir]) {
    const entries = await readdir(dir).catch(() => [] as string[]);
    for (const name of entries.filter((n) => n.startsWith('temp-'))) {
      await rm(path.join(dir, name), { recursive: true, force: true });
    }
  }
}
