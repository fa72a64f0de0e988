/**
 * Runs the host tools the pools need (btrfs, mkfs.btrfs, losetup, mount, cp, ...) with
 * argument arrays, never through a shell, and turns their failures into PoolErrors that
 * carry the tool's own message.
 */
import { execFile } from 'node:child_process';
import { access, constants } from 'node:fs/promises';
import path from 'node:path';
import { PoolError } from './pool.js';

/**
 * A fixed search path: the tools live in sbin directories that a service manager's PATH
 * may leave out, and a fixed environment keeps their output in the C locale we parse.
 */
const SEARCH_PATH = ['/usr/local/sbin', '/usr/local/bin', '/usr/sbin', '/usr/bin', '/sbin', '/bin'];
const ENV = { PATH: SEARCH_PATH.join(':'), LC_ALL: 'C' };

/** What a finished command printed. */
export interface ToolOutput {
  stdout: string;
  stderr: string;
}

/** A command that exited with a failure; `code` is its exit status when it had one. */
export class ToolError extends PoolError {
  constructor(
    readonly command: string,
    readonly exitCode: number | null,
    readonly stderr: string,
  ) {
    super(
      /no space left|quota exceeded/i.test(stderr) ? 'no-space' : 'backend',
      `${command} failed${exitCode === null ? '' : ` (exit ${exitCode})`}: ${stderr.trim() || 'no message'}`,
    );
  }
}

/**
 * Runs `cmd args...` and returns its output; throws a {@link ToolError} when it exits
 * non-zero (or cannot start). `timeoutMs` guards against a tool hanging on a stuck device.
 */
export function runTool(
  cmd: string,
  args: string[],
  opts: { timeoutMs?: number } = {},
): Promise<ToolOutput> {
  return new Promise((resolve, reject) => {
    execFile(
      cmd,
      args,
      { env: ENV, timeout: opts.timeoutMs ?? 120_000, maxBuffer: 16 * 1024 * 1024 },
      (err, stdout, stderr) => {
        if (!err) return resolve({ stdout, stderr });
        const exit = typeof err.code === 'number' ? err.code : null;
        const why = stderr || (exit === null ? err.message : '');
        reject(new ToolError([cmd, ...args].join(' '), exit, why));
      },
    );
  });
}

/** The absolute path of an executable found on the tools' search path, or undefined. */
export async function findTool(name: string): Promise<string | undefined> {
  for (const dir of SEARCH_PATH) {
    const candidate = path.join(dir, name);
    try {
      await access(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not in this directory
    }
  }
  return undefined;
}
