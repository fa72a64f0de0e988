/**
 * Runs a host tool (`ip`, `mount`, `mkfifo`…) from an argument array, never a shell
 * string, and turns a failure into an error that carries the tool's own words.
 */
import { execFile } from 'node:child_process';

/** A failed tool run: the command, its exit code and what it wrote to stderr. */
export class CommandError extends Error {
  constructor(
    readonly argv: string[],
    readonly exitCode: number | null,
    readonly stderr: string,
  ) {
    super(`${argv.join(' ')} failed (exit ${exitCode ?? 'signal'}): ${stderr.trim()}`);
  }
}

/** PATH for the tools, whatever the caller's environment holds. */
const TOOL_ENV = {
  PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
  LANG: 'C',
};

/**
 * Runs `argv`, resolving with its stdout; rejects with a CommandError when it fails.
 * `input` is written to its stdin (for `ip -batch -`).
 */
export function run(argv: string[], timeoutMs = 30_000, input?: string): Promise<string> {
  const [file, ...args] = argv;
  if (!file) return Promise.reject(new Error('empty command'));
  return new Promise((resolve, reject) => {
    const child = execFile(
      file,
      args,
      { env: TOOL_ENV, timeout: timeoutMs, maxBuffer: 16 * 1024 * 1024 },
      (err, stdout, stderr) => {
        if (!err) return resolve(stdout);
        const code = typeof err.code === 'number' ? err.code : null;
        reject(new CommandError(argv, code, stderr || err.message));
      },
    );
    if (input !== undefined) child.stdin?.end(input);
  });
}
