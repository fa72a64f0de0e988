/**
 * Runs host tools (`ip`, `mount`, `nft`, `btrfs`…) from argument arrays, through a small
 * helper process (spawner-child.ts) rather than from pier itself: Node's spawn forks the
 * calling process and waits for the exec, and from a process of pier's size that stops
 * its event loop for 5–20 ms per command, which a machine's start pays a few times over
 * on its critical path. The helper is started on first use and ends with pier; until it
 * is ready, and if it dies, commands are spawned directly, so nothing ever waits on it.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { execTool } from './exec-tool.js';
import { nodeScriptArgv } from './node-script.js';
import type { SpawnReply, SpawnRequest } from './protocol.js';

/** What a command is run with. */
export interface ToolOptions {
  env: Record<string, string>;
  timeoutMs: number;
  maxBuffer: number;
  /** Written to its stdin, which is then closed. */
  input?: string;
}

/** A command that failed: execFile's error, with what the command printed. */
export class ToolRunError extends Error {
  constructor(
    message: string,
    /** The exit status, or an errno name (`ENOENT`) when it could not start. */
    readonly code: number | string | null,
    readonly signal: string | null,
    readonly killed: boolean,
    readonly stdout: string,
    readonly stderr: string,
  ) {
    super(message);
  }
}

type Pending = {
  resolve: (out: { stdout: string; stderr: string }) => void;
  reject: (e: Error) => void;
};

let helper: ChildProcess | undefined;
let ready = false;
let nextId = 1;
const pending = new Map<number, Pending>();

/** Runs `file args…`; resolves with its output when it exits 0, else rejects with a ToolRunError. */
export function runTool(
  file: string,
  args: string[],
  opts: ToolOptions,
): Promise<{ stdout: string; stderr: string }> {
  const request: SpawnRequest = { id: nextId++, file, args, ...opts };
  const child = ready ? helper : (startHelper(), undefined);
  if (!child?.connected) return execTool(request).then(outcome);
  return new Promise((resolve, reject) => {
    pending.set(request.id, { resolve, reject });
    child.send(request, (err) => {
      if (!err || !pending.delete(request.id)) return;
      execTool(request).then(outcome).then(resolve, reject); // never reached the helper
    });
  });
}

/** The reply's output, or its failure as a ToolRunError. */
function outcome(reply: SpawnReply): { stdout: string; stderr: string } {
  if (!reply.error) return { stdout: reply.stdout, stderr: reply.stderr };
  const { message, code, signal, killed } = reply.error;
  throw new ToolRunError(message, code, signal, killed, reply.stdout, reply.stderr);
}

/** Starts the helper in the background, once. */
function startHelper(): void {
  if (helper) return;
  const child = spawn(process.execPath, nodeScriptArgv(import.meta.url, 'spawner-child', 16), {
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
  });
  helper = child;
  child.unref();
  (child.channel as { unref?(): void } | undefined)?.unref?.();
  child.on('message', (msg: SpawnReply | { ready: true }) => {
    if ('ready' in msg) {
      ready = true;
      return;
    }
    const call = pending.get(msg.id);
    if (!call) return;
    pending.delete(msg.id);
    try {
      call.resolve(outcome(msg));
    } catch (err) {
      call.reject(err as Error);
    }
  });
  const gone = () => {
    if (helper !== child) return;
    helper = undefined; // started again on the next command
    ready = false;
    // What it had in hand may have run or not: said as a failure, never run twice.
    for (const [id, call] of pending) {
      pending.delete(id);
      call.reject(new ToolRunError('the spawner process ended', null, null, false, '', ''));
    }
  };
  child.once('exit', gone);
  child.once('error', gone);
}
