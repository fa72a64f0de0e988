/**
 * The platform's control connection to a running server: the admin ACL user over the
 * private Unix socket. Used to wait for readiness, to stop, to save and to read INFO.
 */
import { readFile } from 'node:fs/promises';
import { EngineError } from '../engine.js';
import { ADMIN_USER } from './config.js';
import type { RedisPaths } from './paths.js';
import { isAlive, logTail, sleep } from './process.js';
import { RespConnection, RespError } from './resp.js';

/** How long a server may take to load its data and answer PING. */
export const START_TIMEOUT_MS = 10 * 60_000;

/** An authenticated control connection; the caller closes it. */
export async function adminConnect(paths: RedisPaths): Promise<RespConnection> {
  const password = (await readFile(paths.adminPassFile, 'utf8')).trim();
  const conn = await RespConnection.connect(paths.socket);
  try {
    await conn.command(['AUTH', ADMIN_USER, password]);
    return conn;
  } catch (err) {
    conn.close();
    throw err;
  }
}

/** Runs `fn` on a fresh control connection and closes it. */
export async function withAdmin<T>(
  paths: RedisPaths,
  fn: (conn: RespConnection) => Promise<T>,
): Promise<T> {
  const conn = await adminConnect(paths);
  try {
    return await fn(conn);
  } finally {
    conn.close();
  }
}

/** The fields of an INFO reply (`name:value` lines). */
export function parseInfo(text: string): Record<string, string> {
  const fields: Record<string, string> = {};
  for (const line of text.split('\r\n')) {
    const colon = line.indexOf(':');
    if (colon > 0 && !line.startsWith('#')) fields[line.slice(0, colon)] = line.slice(colon + 1);
  }
  return fields;
}

/** INFO of one section. */
export async function info(conn: RespConnection, section: string): Promise<Record<string, string>> {
  return parseInfo(String(await conn.command(['INFO', section])));
}

/** An error for a server that did not come up, with the end of its log. */
export async function startFailure(paths: RedisPaths, why: string): Promise<EngineError> {
  const tail = await logTail(paths);
  const full = /No space left on device|Disk quota exceeded/i.test(tail);
  return new EngineError(
    full ? 'no-space' : 'failed',
    `redis ${why} (log ${paths.logFile}):\n${tail || '(the log is empty)'}`,
  );
}

/**
 * Resolves when the server `pid` answers PING on its control socket, polling in 10 ms
 * steps; throws (with the log's tail) as soon as the process is gone, or at the timeout.
 */
export async function waitReady(
  paths: RedisPaths,
  pid: number,
  timeoutMs = START_TIMEOUT_MS,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (!(await isAlive(pid))) throw await startFailure(paths, `exited while starting`);
    try {
      const reply = await withAdmin(paths, (conn) => conn.command(['PING']));
      if (reply === 'PONG') return;
    } catch (err) {
      // Not listening yet, or still loading its data: keep polling. Anything else (a
      // refused password) will not get better.
      const loading = err instanceof RespError && err.message.startsWith('LOADING');
      if (err instanceof RespError && !loading) {
        throw await startFailure(paths, `refused the control connection: ${err.message}`);
      }
    }
    if (Date.now() >= deadline) {
      throw await startFailure(paths, `did not answer within ${timeoutMs / 1000} s`);
    }
    await sleep(10);
  }
}

/**
 * Makes the running server write a fresh RDB (a fork: the server keeps serving) and waits
 * for it. A save already in progress (another copy being made) is waited out first,
 * because its snapshot may predate this call.
 */
export async function freshRdb(conn: RespConnection): Promise<void> {
  for (;;) {
    try {
      await conn.command(['BGSAVE']);
      break;
    } catch (err) {
      if (!(err instanceof RespError) || !/in progress/i.test(err.message)) throw err;
      await sleep(20);
    }
  }
  for (;;) {
    const p = await info(conn, 'persistence');
    if (p.rdb_bgsave_in_progress === '0') {
      if (p.rdb_last_bgsave_status !== 'ok') {
        throw new EngineError('failed', 'redis could not write an RDB snapshot (BGSAVE failed)');
      }
      return;
    }
    await sleep(10);
  }
}
