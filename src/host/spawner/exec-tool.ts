/** One command run with execFile, its outcome as plain data (for IPC, and for the direct path). */
import { execFile } from 'node:child_process';
import type { SpawnReply, SpawnRequest } from './protocol.js';

export function execTool(req: SpawnRequest): Promise<SpawnReply> {
  return new Promise((resolve) => {
    const child = execFile(
      req.file,
      req.args,
      { env: req.env, timeout: req.timeoutMs, maxBuffer: req.maxBuffer },
      (err, stdout, stderr) => {
        if (!err) return resolve({ id: req.id, stdout, stderr });
        const e = err as NodeJS.ErrnoException & { killed?: boolean; signal?: string | null };
        const code = typeof e.code === 'number' || typeof e.code === 'string' ? e.code : null;
        const error = { message: e.message, code, signal: e.signal ?? null, killed: !!e.killed };
        resolve({ id: req.id, stdout, stderr, error });
      },
    );
    child.stdin?.on('error', () => {}); // a command that does not read its input
    child.stdin?.end(req.input);
  });
}
