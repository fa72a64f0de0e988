/**
 * Where everything of one Redis instance lives inside its pool volume. The volume holds
 * the whole instance (config, TLS copies, data, log), so a snapshot or copy of it is a
 * complete server and destroying it leaves nothing behind; only the control socket may
 * live outside it, when the volume's path is too deep for a Unix socket address.
 *
 * Ownership: the volume's top directory and everything pier writes (config, TLS copies,
 * admin password, pidfile, log, marker) belong to root, so the server (the service user)
 * can read what it needs but change none of it; only `data/` (Redis's `dir`) and `run/`
 * (its socket) belong to the service user.
 */
import { createHash } from 'node:crypto';
import path from 'node:path';

/** sun_path holds 108 bytes, the terminating NUL included. */
const SUN_PATH_MAX = 107;

/** Name of the AOF directory and files (Redis's defaults, spelled out in the config). */
export const AOF_DIR_NAME = 'appendonlydir';
export const AOF_BASENAME = 'appendonly.aof';
export const RDB_NAME = 'dump.rdb';

/** Paths of one instance, all derived from its volume's path. */
export interface RedisPaths {
  /** The volume's top directory. */
  root: string;
  /** redis.conf, written by pier on every start. */
  conf: string;
  /** Redis's working directory (`dir`): the RDB and the AOF directory. */
  dataDir: string;
  aofDir: string;
  manifest: string;
  rdb: string;
  /** Copies of the server certificate, its key and the CA, readable by the service user. */
  tlsDir: string;
  certFile: string;
  keyFile: string;
  caFile: string;
  pidFile: string;
  /** The server's stdout and stderr (Redis logs to stdout: `logfile ""`). */
  logFile: string;
  /** Password of the platform's admin user (0600); the config holds only its digest. */
  adminPassFile: string;
  /** Names the instance whose volume this is once its data is complete (branch, restore). */
  marker: string;
  /** Private (0700) directory of the control socket, owned by the service user. */
  socketDir: string;
  socket: string;
  /**
   * The root-owned directory under /tmp that holds socketDir when the volume is too deep
   * for sun_path; it must be removed on its own. Undefined when socketDir is in the volume.
   */
  socketRoot?: string;
}

/** The paths of the instance whose volume is at `root`. */
export function redisPaths(root: string): RedisPaths {
  const dataDir = path.join(root, 'data');
  const aofDir = path.join(dataDir, AOF_DIR_NAME);
  const tlsDir = path.join(root, 'tls');
  let socketDir = path.join(root, 'run');
  let socketRoot: string | undefined;
  if (Buffer.byteLength(path.join(socketDir, 'redis.sock')) > SUN_PATH_MAX) {
    // A deep pool would overflow sun_path: keep the socket in a short private directory,
    // named after the volume so that every call finds the same one.
    const digest = createHash('sha256').update(root).digest('hex').slice(0, 16);
    socketRoot = path.join('/tmp', `pier-redis-${digest}`);
    socketDir = path.join(socketRoot, 'run');
  }
  return {
    root,
    conf: path.join(root, 'redis.conf'),
    dataDir,
    aofDir,
    manifest: path.join(aofDir, `${AOF_BASENAME}.manifest`),
    rdb: path.join(dataDir, RDB_NAME),
    tlsDir,
    certFile: path.join(tlsDir, 'server.pem'),
    keyFile: path.join(tlsDir, 'server.key'),
    caFile: path.join(tlsDir, 'ca.pem'),
    pidFile: path.join(root, 'redis.pid'),
    logFile: path.join(root, 'redis.log'),
    adminPassFile: path.join(root, 'admin.pass'),
    marker: path.join(root, 'instance'),
    socketDir,
    socket: path.join(socketDir, 'redis.sock'),
    ...(socketRoot ? { socketRoot } : {}),
  };
}
