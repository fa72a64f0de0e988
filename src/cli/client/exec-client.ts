/**
 * The client side of a machine's shell session, `GET /v1/machines/:id/exec` upgraded to a
 * WebSocket (used by `pier machines exec`, `pier exec` and `pier ssh`).
 *
 * Protocol: binary frames carry bytes behind a channel byte (client→server 0 = stdin;
 * server→client 1 = stdout, 2 = stderr; with a tty everything comes on 1). Text frames are
 * JSON: the client sends `{type: 'resize', cols, rows}` and `{type: 'eof'}`, the server
 * sends `{type: 'exit', code, signal}` once, then closes with 1000, or `{type: 'error',
 * error, code}` when the host fails after the upgrade. A refused upgrade is an ordinary
 * HTTP error answer with the usual `{error, code}` body.
 *
 * With a terminal on both ends the local one goes into raw mode (every key, Ctrl-C
 * included, goes to the machine) and is restored however the session ends.
 */
import { constants } from 'node:os';
import type { IncomingMessage } from 'node:http';
import WebSocket from 'ws';
import { toApiCallError } from './api-client.js';
import { NetworkError } from './errors.js';

/** Where the session runs and with which key. */
export interface ExecTarget {
  apiUrl: string;
  apiKey: string;
  machineId: string;
}

/** What to run: no `cmd` is an interactive shell. */
export interface ExecRequest {
  cmd: string[];
  tty: boolean;
  cols?: number;
  rows?: number;
}

/** The local ends of the session. */
export interface ExecStreams {
  stdin: NodeJS.ReadStream;
  stdout: NodeJS.WriteStream;
  stderr: NodeJS.WriteStream;
}

/** How the remote command ended. */
export interface ExecExit {
  code: number | null;
  signal: string | null;
}

const STDIN = 0;
const STDOUT = 1;
const STDERR = 2;
/** Stdin is paused while this much is queued for the network. */
const HIGH_WATER = 1 << 20;

/** The upgrade address: ws(s):// form of the API address with the query of the request. */
export function execUrl(target: ExecTarget, req: ExecRequest): string {
  const url = new URL(`/v1/machines/${encodeURIComponent(target.machineId)}/exec`, target.apiUrl);
  url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
  for (const arg of req.cmd) url.searchParams.append('cmd', arg);
  url.searchParams.set('tty', String(req.tty));
  if (req.cols) url.searchParams.set('cols', String(req.cols));
  if (req.rows) url.searchParams.set('rows', String(req.rows));
  return url.toString();
}

/**
 * Opens the session. A refused upgrade rejects with the API's error (`ApiCallError`, with
 * `retryAfter` on 429); an unreachable API with a `NetworkError`.
 */
export function openExec(target: ExecTarget, req: ExecRequest): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(execUrl(target, req), {
      headers: { authorization: `Bearer ${target.apiKey}` },
      perMessageDeflate: false,
    });
    let settled = false;
    const fail = (err: Error) => {
      if (settled) return;
      settled = true;
      reject(err);
    };
    ws.once('open', () => {
      settled = true;
      ws.off('error', onError);
      resolve(ws);
    });
    const onError = (err: Error) =>
      fail(new NetworkError(`cannot reach ${target.apiUrl}: ${reasonOf(err)}`));
    ws.on('error', onError);
    ws.once('unexpected-response', (_req, res: IncomingMessage) => {
      readAnswer(res).then(
        (err) => {
          fail(err);
          ws.terminate();
        },
        (err: Error) => {
          fail(new NetworkError(`the exec answer broke off: ${err.message}`));
          ws.terminate();
        },
      );
    });
  });
}

/**
 * Runs a session on an open socket: stdin goes out, stdout and stderr come in, until the
 * server reports the exit and closes. Resolves with how the remote command ended.
 */
export function runSession(
  ws: WebSocket,
  req: ExecRequest,
  streams: ExecStreams,
): Promise<ExecExit> {
  const { stdin, stdout, stderr } = streams;
  const raw = req.tty && stdin.isTTY === true;
  let exit: ExecExit | undefined;
  let failure: Error | undefined;
  const send = (data: Buffer | string) => {
    if (ws.readyState !== WebSocket.OPEN) return;
    ws.send(data, () => {
      if (ws.bufferedAmount < HIGH_WATER && stdin.isPaused()) stdin.resume();
    });
    if (ws.bufferedAmount >= HIGH_WATER) stdin.pause();
  };

  const onData = (chunk: Buffer | string) => {
    const bytes = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
    send(Buffer.concat([Buffer.of(STDIN), bytes]));
  };
  const onEnd = () => send(JSON.stringify({ type: 'eof' }));
  const onResize = () => {
    if (stdout.columns && stdout.rows) {
      send(JSON.stringify({ type: 'resize', cols: stdout.columns, rows: stdout.rows }));
    }
  };
  // Whatever ends the process, the terminal must not stay raw.
  const restore = () => {
    if (raw) stdin.setRawMode(false);
  };
  const onSignal = (signal: NodeJS.Signals) => {
    restore();
    process.exit(128 + (constants.signals[signal] ?? 15));
  };

  return new Promise<ExecExit>((resolve, reject) => {
    ws.on('message', (data: WebSocket.RawData, isBinary: boolean) => {
      const buf = toBuffer(data);
      if (isBinary) {
        const out = buf[0] === STDERR ? stderr : buf[0] === STDOUT ? stdout : undefined;
        // Slow local output (a pager, a full pipe) holds the socket, not memory.
        if (out && !out.write(buf.subarray(1))) {
          ws.pause();
          out.once('drain', () => ws.resume());
        }
        return;
      }
      const msg = parseJson(buf.toString('utf8'));
      if (msg?.type === 'exit') {
        exit = {
          code: typeof msg.code === 'number' ? msg.code : null,
          signal: typeof msg.signal === 'string' ? msg.signal : null,
        };
      } else if (msg?.type === 'error') {
        // The host failed after the upgrade: the usual error body, then a close.
        failure = toApiCallError({ status: 500, headers: new Headers(), body: msg });
      }
    });
    ws.once('error', (err) => {
      cleanup();
      reject(new NetworkError(`the session broke off: ${reasonOf(err)}`));
    });
    ws.once('close', (code, reason) => {
      cleanup();
      if (exit) return resolve(exit);
      if (failure) return reject(failure);
      const why = reason.toString('utf8') || `close code ${code}`;
      reject(new NetworkError(`the session ended without an exit status (${why})`));
    });

    if (raw) {
      stdin.setRawMode(true);
      process.once('exit', restore);
      process.once('SIGTERM', onSignal);
      process.once('SIGHUP', onSignal);
      stdout.on('resize', onResize);
    }
    stdin.on('data', onData);
    stdin.once('end', onEnd);
    stdin.resume();

    function cleanup() {
      stdin.off('data', onData);
      stdin.off('end', onEnd);
      stdout.off('resize', onResize);
      process.off('exit', restore);
      process.off('SIGTERM', onSignal);
      process.off('SIGHUP', onSignal);
      restore();
      // Nothing more will be read: let the process end even if stdin stays open.
      stdin.pause();
      if (!stdin.isTTY) stdin.destroy();
    }
  });
}

/** Opens a session, runs it on the given streams and answers the local exit code. */
export async function execCommand(
  target: ExecTarget,
  req: ExecRequest,
  streams: ExecStreams = { stdin: process.stdin, stdout: process.stdout, stderr: process.stderr },
): Promise<number> {
  const ws = await openExec(target, req);
  return exitCodeOf(await runSession(ws, req, streams));
}

/** The remote exit code, or 128 + the signal's number as a shell reports it. */
export function exitCodeOf(exit: ExecExit): number {
  if (exit.code !== null) return exit.code;
  if (exit.signal !== null) {
    const n = constants.signals[exit.signal as keyof typeof constants.signals];
    return n === undefined ? 1 : 128 + n;
  }
  return 1;
}

/** A refused upgrade's body as the API client would report it. */
export async function readAnswer(res: IncomingMessage) {
  const chunks: Buffer[] = [];
  for await (const chunk of res) chunks.push(chunk as Buffer);
  const text = Buffer.concat(chunks).toString('utf8');
  let body: unknown = text === '' ? undefined : text;
  try {
    if (text !== '') body = JSON.parse(text);
  } catch {
    // Not JSON (a proxy's page): the text goes into the message.
  }
  const headers = new Headers();
  for (const [k, v] of Object.entries(res.headers)) {
    if (typeof v === 'string') headers.set(k, v);
    else if (Array.isArray(v)) for (const one of v) headers.append(k, one);
  }
  return toApiCallError({ status: res.statusCode ?? 0, headers, body });
}

function toBuffer(data: WebSocket.RawData): Buffer {
  if (Buffer.isBuffer(data)) return data;
  if (Array.isArray(data)) return Buffer.concat(data);
  return Buffer.from(data);
}

function parseJson(text: string): Record<string, unknown> | undefined {
  try {
    const v = JSON.parse(text) as unknown;
    return typeof v === 'object' && v !== null ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

function reasonOf(err: Error): string {
  const code = (err as NodeJS.ErrnoException).code;
  return typeof code === 'string' ? code : err.message;
}
