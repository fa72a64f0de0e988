/**
 * A shell session on a machine through the API, over a real WebSocket (spec 4.9 exec):
 * what the tests of sessions and of isolation share.
 */
import WebSocket from 'ws';
import type { MachineBed } from './bed.js';

/** A WebSocket session: what it printed per channel, and its exit message. */
export interface Session {
  ws: WebSocket;
  out: { 1: string; 2: string };
  exit: Promise<{ code: number | null; signal: string | null } | undefined>;
  send(text: string): void;
}

export function openSession(
  bed: MachineBed,
  machine: string,
  query = '',
  token = bed.org.token,
): Promise<Session> {
  const url = `${bed.tp.url.replace('http', 'ws')}/v1/machines/${machine}/exec${query}`;
  const ws = new WebSocket(url, { headers: { authorization: `Bearer ${token}` } });
  const out = { 1: '', 2: '' };
  let exitMessage: { code: number | null; signal: string | null } | undefined;
  ws.on('message', (data: Buffer, binary) => {
    if (binary) out[data[0] as 1 | 2] += data.subarray(1).toString();
    else {
      const msg = JSON.parse(data.toString());
      if (msg.type === 'exit') exitMessage = msg;
    }
  });
  const exit = new Promise<typeof exitMessage>((resolve) =>
    ws.on('close', () => resolve(exitMessage)),
  );
  return new Promise((resolve, reject) => {
    ws.on('open', () =>
      resolve({
        ws,
        out,
        exit,
        send: (text) => ws.send(Buffer.concat([Buffer.of(0), Buffer.from(text)])),
      }),
    );
    ws.on('unexpected-response', (_req, res) => {
      let body = '';
      res.on('data', (c) => (body += c));
      res.on('end', () =>
        reject(
          Object.assign(new Error(`HTTP ${res.statusCode}`), {
            status: res.statusCode,
            body: JSON.parse(body),
            headers: res.headers,
          }),
        ),
      );
    });
    ws.on('error', reject);
  });
}

/** Waits until `check()` holds, polling every 20 ms; throws after `ms`. */
export async function until(check: () => boolean, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 20));
  }
}
