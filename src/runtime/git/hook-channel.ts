/**
 * The pier end of one push's hook (hook.ts): a unix socket in a private directory made
 * for this push alone, named to receive-pack (and so to its hook) in `PIER_PUSH_SOCKET`.
 * It takes one connection, reads the hook's one request line, hands it to the push's
 * handler, relays what the handler says, and ends with the handler's exit code.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { z } from 'zod';

/** What the hook sends: git's pre-receive stdin, and the quarantine of the push's objects. */
const hookRequest = z.object({
  updates: z.string().max(1024 * 1024),
  quarantine: z.string().max(4096),
});
export type HookRequest = z.infer<typeof hookRequest>;

/**
 * Decides the push: `say` reaches the pushing client line by line; the answer is the
 * hook's exit code (0: the refs move). `signal` aborts when the hook is gone.
 */
export type HookHandler = (
  req: HookRequest,
  say: (text: string) => void,
  signal: AbortSignal,
) => Promise<number>;

export interface HookChannel {
  socketPath: string;
  /** Whether the hook called (a push with commands; the HTTP auth probe has none). */
  readonly called: boolean;
  /** Settles once the handler of a call has ended (at once when none came). */
  settled(): Promise<void>;
  close(): Promise<void>;
}

const MAX_REQUEST = 1024 * 1024 + 8192;

export async function openHookChannel(
  handle: HookHandler,
  onError: (err: unknown) => void,
): Promise<HookChannel> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'pier-push-'));
  const socketPath = path.join(dir, 'hook.sock');
  let called = false;
  let running: Promise<void> | undefined;
  const server = net.createServer((conn) => {
    if (called) return conn.destroy(); // one push, one hook
    called = true;
    running = serve(conn, handle).catch(onError);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(socketPath, () => resolve());
  });
  return {
    socketPath,
    get called() {
      return called;
    },
    settled: () => running ?? Promise.resolve(),
    async close() {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await rm(dir, { recursive: true, force: true });
    },
  };
}

async function serve(conn: net.Socket, handle: HookHandler): Promise<void> {
  const gone = new AbortController();
  conn.on('close', () => gone.abort());
  conn.on('error', () => undefined); // a hook that died: `close` follows
  const line = await firstLine(conn);
  const say = (text: string) => {
    if (!conn.destroyed && text) conn.write(`${JSON.stringify({ say: text })}\n`);
  };
  let code = 1;
  try {
    const parsed = hookRequest.safeParse(line === undefined ? undefined : JSON.parse(line));
    if (!parsed.success) throw new Error('the hook sent no valid request');
    code = await handle(parsed.data, say, gone.signal);
  } finally {
    if (!conn.destroyed) conn.end(`${JSON.stringify({ exit: code })}\n`);
  }
}

/** The first line the hook writes, or undefined if it ends or oversteps the cap first. */
function firstLine(conn: net.Socket): Promise<string | undefined> {
  return new Promise((resolve) => {
    let buf = '';
    conn.setEncoding('utf8');
    const onData = (chunk: string) => {
      buf += chunk;
      const nl = buf.indexOf('\n');
      if (nl >= 0) {
        conn.off('data', onData);
        conn.pause();
        resolve(buf.slice(0, nl));
      } else if (buf.length > MAX_REQUEST) {
        conn.destroy();
        resolve(undefined);
      }
    };
    conn.on('data', onData);
    conn.once('close', () => resolve(undefined));
  });
}
