/**
 * The baselines of the database benchmarks: plain PostgreSQL 15 clusters made and run by
 * hand in a temp dir, as an operator would without pier. Every tool and server runs as the
 * unprivileged `pier` user, with argument arrays only (never a shell). The server is
 * spawned directly and readiness read from postmaster.pid every 10 ms, as pier does (and
 * ten times as often as `pg_ctl start -w`), so both sides wait for a start the same way.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { chown, mkdtemp, open, readFile, rm } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';

export const PG_BIN = process.env.PIER_BENCH_PG_BIN ?? '/usr/lib/postgresql/15/bin';
/** The superuser of a plain cluster (initdb -U). */
const SUPERUSER = 'postgres';
/** The environment of every tool and server: nothing of ours inherited. */
const CHILD_ENV: NodeJS.ProcessEnv = {
  PATH: '/usr/local/bin:/usr/bin:/bin',
  LANG: 'C.UTF-8',
  TZ: 'UTC',
  HOME: '/nonexistent',
};

export interface User {
  uid: number;
  gid: number;
}

let userPromise: Promise<User> | undefined;

/** The uid and gid of the unprivileged `pier` user (as `id -u pier` / `id -g pier`). */
export function pierUser(): Promise<User> {
  userPromise ??= (async () => {
    const uid = Number((await tool('id', ['-u', 'pier'])).trim());
    const gid = Number((await tool('id', ['-g', 'pier'])).trim());
    if (!Number.isInteger(uid) || !Number.isInteger(gid)) throw new Error('no pier user');
    return { uid, gid };
  })();
  return userPromise;
}

/** Runs `file args…` (as `user` when given) and answers its stdout; fails with its stderr. */
export function tool(file: string, args: string[], user?: User): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      file,
      args,
      { ...(user ?? {}), cwd: '/', env: CHILD_ENV, maxBuffer: 16 * 1024 * 1024 },
      (err, stdout, stderr) => {
        if (!err) return resolve(stdout);
        reject(new Error(`${path.basename(file)} ${args.join(' ')}: ${stderr || err.message}`));
      },
    );
  });
}

/** A new private (0700) temp dir owned by the pier user; remove it with `rm -r`. */
export async function pierTempDir(prefix: string): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), prefix));
  const u = await pierUser();
  await chown(dir, u.uid, u.gid);
  return dir;
}

/** A loopback TCP port that was free a moment ago. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

/** initdb with the options pier's template uses (UTF8, C.UTF-8, data checksums), trust auth. */
export async function initdb(pgdata: string): Promise<void> {
  await tool(
    path.join(PG_BIN, 'initdb'),
    [
      ...['-D', pgdata, '-U', SUPERUSER, '--auth=trust', '-E', 'UTF8'],
      ...['--locale=C.UTF-8', '--data-checksums'],
    ],
    await pierUser(),
  );
}

/** `cp -a` of a directory tree as the pier user (`to` must not exist). */
export async function copyTree(from: string, to: string): Promise<void> {
  await tool('cp', ['-a', '-T', from, to], await pierUser());
}

/** A running plain server: its data dir, TCP port and process. */
export class PlainServer {
  private exit: string | undefined;

  private constructor(
    readonly pgdata: string,
    readonly port: number,
    private readonly child: ChildProcess,
    readonly logFile: string,
  ) {
    child.on(
      'exit',
      (code, signal) => (this.exit = signal ? `killed by ${signal}` : `exit ${code}`),
    );
    child.on('error', (err) => (this.exit = err.message));
  }

  /**
   * Spawns `postgres -D pgdata` (TCP on 127.0.0.1, its socket in `pgdata`'s parent), with
   * `settings` as `-c` options, and resolves once postmaster.pid says `ready`. With
   * hot_standby off, a server in recovery only says so once it was promoted.
   */
  static async start(
    pgdata: string,
    settings: Record<string, string> = {},
    timeoutMs = 10 * 60_000,
  ): Promise<PlainServer> {
    const u = await pierUser();
    const port = await freePort();
    const logFile = path.join(path.dirname(pgdata), `${path.basename(pgdata)}.log`);
    const log = await open(logFile, 'a', 0o600);
    let child: ChildProcess;
    try {
      await chown(logFile, u.uid, u.gid);
      const opts: Record<string, string> = {
        port: String(port),
        listen_addresses: '127.0.0.1',
        unix_socket_directories: path.dirname(pgdata),
        ...settings,
      };
      const args = ['-D', pgdata];
      for (const [k, v] of Object.entries(opts)) args.push('-c', `${k}=${v}`);
      child = spawn(path.join(PG_BIN, 'postgres'), args, {
        stdio: ['ignore', log.fd, log.fd],
        uid: u.uid,
        gid: u.gid,
        cwd: '/',
        env: CHILD_ENV,
      });
    } finally {
      await log.close();
    }
    const server = new PlainServer(pgdata, port, child, logFile);
    await server.waitReady(timeoutMs);
    return server;
  }

  private async waitReady(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const lines = (
        await readFile(path.join(this.pgdata, 'postmaster.pid'), 'utf8').catch(() => '')
      ).split('\n');
      if (Number(lines[0]) === this.child.pid && lines[7]?.trim() === 'ready') return;
      if (this.exit || Date.now() > deadline) {
        const why = this.exit ?? 'not ready in time';
        const tail = (await readFile(this.logFile, 'utf8').catch(() => '')).slice(-2000);
        await this.stop('immediate').catch(() => {});
        throw new Error(`plain PostgreSQL in ${this.pgdata} did not start (${why}):\n${tail}`);
      }
      await sleep(10);
    }
  }

  /** A client of the superuser over TCP, without TLS (trust). */
  client(database = 'postgres'): pg.Client {
    return new pg.Client({ host: '127.0.0.1', port: this.port, user: SUPERUSER, database });
  }

  /** Runs `text` on a fresh connection. */
  async query<T extends pg.QueryResultRow = Record<string, unknown>>(
    text: string,
    values: unknown[] = [],
  ): Promise<T[]> {
    const c = this.client();
    await c.connect();
    try {
      return (await c.query<T>(text, values)).rows;
    } finally {
      await c.end();
    }
  }

  /** SIGINT (fast: a checkpoint, a clean data dir) or SIGQUIT (immediate); waits for the exit. */
  async stop(mode: 'fast' | 'immediate' = 'fast'): Promise<void> {
    if (this.exit) return;
    const gone = new Promise<void>((resolve) => this.child.once('exit', () => resolve()));
    if (this.exit) return;
    this.child.kill(mode === 'fast' ? 'SIGINT' : 'SIGQUIT');
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 60_000);
    await gone;
    clearTimeout(timer);
  }
}

/** A temp dir with a fresh, stopped cluster at `<dir>/pgdata`. */
export async function plainCluster(prefix: string): Promise<{ dir: string; pgdata: string }> {
  const dir = await pierTempDir(prefix);
  const pgdata = path.join(dir, 'pgdata');
  try {
    await initdb(pgdata);
  } catch (err) {
    await rm(dir, { recursive: true, force: true });
    throw err;
  }
  return { dir, pgdata };
}
