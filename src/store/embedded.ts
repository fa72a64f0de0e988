/**
 * The embedded state store: a private PostgreSQL cluster inside the data dir, reachable
 * only through a Unix socket in a private directory, run by the host's own server
 * binaries as an unprivileged user. It is created on first start, reused afterwards,
 * and stopped with the server. A cluster left running by a crashed pier is taken back.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmod, chown, mkdir, stat, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { findPgBinDir } from '../host/pg-binaries.js';
import { assertTraversable, resolveServiceUser, type ServiceUser } from '../host/service-user.js';

const run = promisify(execFile);
const PORT = 5432;
// sun_path holds 108 bytes; PostgreSQL appends "/.s.PGSQL.5432".
const MAX_SOCKET_DIR = 90;

export interface EmbeddedCluster {
  url: string;
  dataDir: string;
  socketDir: string;
  /** True when this call started the server (false when it was already running). */
  started: boolean;
  stop(): Promise<void>;
}

export interface EmbeddedOptions {
  /** Directory that holds the cluster (pgdata, socket, log). */
  dir: string;
  /** OS user to run as when pier is root. */
  serviceUser: string;
  /** Directory of initdb, pg_ctl and postgres; found on the host when absent. */
  binDir?: string;
  /** Skip fsync: for test clusters, whose data is thrown away. */
  ephemeral?: boolean;
}

function socketDirFor(dir: string): string {
  const own = path.join(dir, 'run');
  if (own.length <= MAX_SOCKET_DIR) return own;
  // A deep data dir would overflow sun_path: keep the socket in a short private path.
  const digest = createHash('sha256').update(dir).digest('hex').slice(0, 16);
  return `/tmp/pier-${digest}`;
}

async function ownedDir(dir: string, user: ServiceUser): Promise<void> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  await chown(dir, user.uid, user.gid);
  await chmod(dir, 0o700);
}

async function isRunning(pgCtl: string, pgdata: string, user: ServiceUser): Promise<boolean> {
  try {
    await run(pgCtl, ['status', '-D', pgdata], { uid: user.uid, gid: user.gid });
    return true;
  } catch {
    return false;
  }
}

/** Creates (first time) and starts the cluster, or takes back one that is running. */
export async function startEmbeddedCluster(opts: EmbeddedOptions): Promise<EmbeddedCluster> {
  const user = await resolveServiceUser(opts.serviceUser);
  const binDir = await findPgBinDir(opts.binDir);
  const dir = path.resolve(opts.dir);
  const pgdata = path.join(dir, 'pgdata');
  const socketDir = socketDirFor(dir);
  const logFile = path.join(dir, 'postgres.log');
  const asUser = {
    uid: user.uid,
    gid: user.gid,
    env: { PATH: process.env.PATH ?? '', LANG: 'C.UTF-8' },
  };

  await mkdir(path.dirname(dir), { recursive: true });
  await ownedDir(dir, user);
  await ownedDir(socketDir, user);
  await assertTraversable(dir, user);

  if (!existsSync(path.join(pgdata, 'PG_VERSION'))) {
    const args = ['-D', pgdata, '-U', 'pier', '--auth=trust', '-E', 'UTF8', '--locale=C.UTF-8'];
    if (opts.ephemeral) args.push('--no-sync');
    await run(path.join(binDir, 'initdb'), args, asUser).catch(
      (err: Error & { stderr?: string }) => {
        throw new Error(`initdb failed: ${err.stderr ?? err.message}`);
      },
    );
  }
  // Settings live in the cluster's own auto.conf so that pg_ctl needs no option string.
  const settings = [
    `listen_addresses = ''`,
    `port = ${PORT}`,
    `unix_socket_directories = '${socketDir.replace(/'/g, "''")}'`,
    `unix_socket_permissions = 0700`,
    `max_connections = 200`,
    `shared_buffers = '128MB'`,
    ...(opts.ephemeral
      ? [`fsync = off`, `synchronous_commit = off`, `full_page_writes = off`]
      : []),
  ];
  await writeFile(path.join(pgdata, 'postgresql.auto.conf'), settings.join('\n') + '\n');
  await chown(path.join(pgdata, 'postgresql.auto.conf'), user.uid, user.gid);

  const pgCtl = path.join(binDir, 'pg_ctl');
  let started = false;
  if (!(await isRunning(pgCtl, pgdata, user))) {
    await run(pgCtl, ['start', '-w', '-t', '60', '-D', pgdata, '-l', logFile], asUser).catch(
      (err: Error & { stderr?: string }) => {
        throw new Error(
          `the embedded store did not start (see ${logFile}): ${err.stderr ?? err.message}`,
        );
      },
    );
    started = true;
  }
  const url = `postgresql://pier@localhost/postgres?host=${encodeURIComponent(socketDir)}&port=${PORT}`;
  return {
    url,
    dataDir: pgdata,
    socketDir,
    started,
    async stop() {
      if (!(await stat(pgdata).catch(() => undefined))) return;
      await run(pgCtl, ['stop', '-w', '-m', 'fast', '-D', pgdata], asUser).catch(() => {});
    },
  };
}
