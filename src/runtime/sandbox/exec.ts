/**
 * Runs a host tool (`ip`, `mount`, `mkfifo`…) from an argument array, never a shell
 * string, and turns a failure into an error that carries the tool's own words.
 */
import { runTool, ToolRunError } from '../../host/spawner/spawner.js';

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
 * `input` is written to its stdin (for `ip -batch -`). Spawned through pier's spawner
 * process (host/spawner), so a start's many tools do not stop pier's event loop.
 */
export async function run(argv: string[], timeoutMs = 30_000, input?: string): Promise<string> {
  const [file, ...args] = argv;
  if (!file) throw new Error('empty command');
  const opts = { env: TOOL_ENV, timeoutMs, maxBuffer: 16 * 1024 * 1024 };
  try {
    return (await runTool(file, args, input === undefined ? opts : { ...opts, input })).stdout;
  } catch (err) {
    if (!(err instanceof ToolRunError)) throw err;
    const code = typeof err.code === 'number' ? err.code : null;
    throw new CommandError(argv, code, err.stderr || err.message);
  }
}
