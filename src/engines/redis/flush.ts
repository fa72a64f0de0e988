/**
 * flushArchive for redis: everything the server acknowledged before the call is written
 * to the AOF and fsynced. With `appendfsync everysec` Redis write()s its AOF buffer before
 * it answers clients, but may hold it back up to two seconds while a background fsync is
 * slow; and the fsync itself runs once a second. So this waits until the AOF's size
 * reaches what it was plus what was buffered at the call, then fsyncs the files itself
 * (fsync flushes a file whoever opened it). No extra `#TS:` line is needed: a write after
 * the cut second always starts with its own, later one.
 */
import type { EngineEnv } from '../engine.js';
import { fsyncAof, readManifest } from './aof.js';
import { info, withAdmin } from './control.js';
import type { RedisPaths } from './paths.js';
import { sleep } from './process.js';

/** Longest wait for a held-back buffer (Redis itself writes it after two seconds). */
const WRITE_WAIT_MS = 5_000;

/** Flushes and fsyncs the AOF of the server at `paths` (running: `running` true). */
export async function flushAof(env: EngineEnv, paths: RedisPaths, running: boolean): Promise<void> {
  if (running) {
    const written = await withAdmin(paths, async (conn) => {
      const first = await info(conn, 'persistence');
      if (first.aof_enabled !== '1') return false;
      const goal = Number(first.aof_current_size) + Number(first.aof_buffer_length);
      const deadline = Date.now() + WRITE_WAIT_MS;
      for (;;) {
        const size = Number((await info(conn, 'persistence')).aof_current_size);
        // A size that shrank means a rewrite started over from a new base: also written.
        if (size >= goal || size < Number(first.aof_current_size)) return true;
        if (Date.now() >= deadline) {
          env.log.warn({ aofDir: paths.aofDir }, 'redis held its AOF buffer back for too long');
          return true;
        }
        await sleep(10);
      }
    });
    if (!written) return; // not persistent: there is no archive to flush
  }
  if (await readManifest(paths.aofDir)) await fsyncAof(paths.aofDir);
}
