/**
 * Running PostgreSQL's tools (initdb, pg_basebackup) and cp: always argument arrays,
 * never a shell, with a fixed environment (no PG* variables of pier's own leak in), and
 * failures turned into EngineErrors that carry the tool's own words.
 */
import { execFile } from 'node:child_process';
import type { EngineEnv } from '../engine.js';
import { EngineError } from '../engine.js';

/** The environment every server and tool of ours gets: nothing inherited. */
export const CHILD_ENV: NodeJS.ProcessEnv = {
  PATH: '/usr/local/bin:/usr/bin:/bin',
  LANG: 'C.UTF-8',
  TZ: 'UTC',
  HOME: '/nonexistent',
};

/** Whether a tool's or server's words mean a full disk or an exceeded quota. */
export function soundsLikeNoSpace(text: string): boolean {
  return /no space left on device|disk quota exceeded|quota exceeded/i.test(text);
}

/** An EngineError for `what` failing with `detail`: 'no-space' when it reads like one. */
export function failure(what: string, detail: string): EngineError {
  const text = detail.trim() || 'no message';
  return new EngineError(soundsLikeNoSpace(text) ? 'no-space' : 'failed', `${what}: ${text}`);
}

interface RunOptions {
  timeoutMs?: number;
  /** Run as root rather than as the service user (copies between volumes). */
  asRoot?: boolean;
}

/** Runs `file args…` (as the service user unless `asRoot`) and returns its stdout. */
export function run(
  env: EngineEnv,
  file: string,
  args: string[],
  opts: RunOptions = {},
): Promise<string> {
  const who = opts.asRoot ? {} : { uid: env.user.uid, gid: env.user.gid };
  return new Promise((resolve, reject) => {
    execFile(
      file,
      args,
      {
        ...who,
        // '/' because the service user may not reach pier's own working directory, and a
        // tool whose cwd were a data directory would look like one of its server's processes.
        cwd: '/',
        env: CHILD_ENV,
        timeout: opts.timeoutMs ?? 10 * 60_000,
        maxBuffer: 16 * 1024 * 1024,
      },
      (err, stdout, stderr) => {
        if (!err) return resolve(stdout);
        const name = file.split('/').pop() ?? file;
        reject(failure(`${name} failed`, stderr || err.message));
      },
    );
  });
}

/** A full copy of directory `from` to `to` (which must not exist), keeping owners and modes. */
export async function copyTree(env: EngineEnv, from: string, to: string): Promise<void> {
  await run(env, 'cp', ['-a', '--reflink=auto', '-T', from, to], {
    asRoot: true,
    timeoutMs: 24 * 3_600_000,
  });
}
