/**
 * A full garbage collection in another node process, through its inspector
 * (`--inspect=127.0.0.1:0`; the address is read from the line node prints on start-up):
 * so that a memory figure taken after a load shows what is still held, not what the
 * collector has not yet got round to.
 */
import WebSocket from 'ws';

/** The inspector's WebSocket URL in a process's output, or undefined. */
export function inspectorUrlIn(log: string): string | undefined {
  return /Debugger listening on (ws:\/\/\S+)/.exec(log)?.[1];
}

/** Asks the inspector at `url` for a full collection; resolves when it is done. */
export function collectGarbage(url: string, timeoutMs = 30_000): Promise<void> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url);
    const timer = setTimeout(() => {
      ws.terminate();
      reject(new Error(`no answer from the inspector at ${url} within ${timeoutMs} ms`));
    }, timeoutMs);
    const done = (err?: Error) => {
      clearTimeout(timer);
      ws.close();
      if (err) reject(err);
      else resolve();
    };
    ws.on('open', () => ws.send(JSON.stringify({ id: 1, method: 'HeapProfiler.collectGarbage' })));
    ws.on('message', (data: Buffer) => {
      const msg = JSON.parse(data.toString('utf8')) as { id?: number; error?: { message: string } };
      if (msg.id !== 1) return;
      done(msg.error ? new Error(msg.error.message) : undefined);
    });
    ws.on('error', (err) => done(err));
  });
}
