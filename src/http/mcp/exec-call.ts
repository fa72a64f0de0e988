/**
 * The `machine_exec` tool: runs one command in a machine through the shell-session route
 * (`GET /v1/machines/:id/exec`, a WebSocket), over a real connection to this replica's own
 * listener with the caller's own Authorization, so the route's auth row, agent judge,
 * audit row, session record and shell-start limit apply as to any client. It closes
 * stdin, gathers stdout and stderr (each up to OUTPUT_CAP bytes) and answers with the
 * exit; past the timeout it closes the socket, which kills the process tree.
 */
import type { FastifyInstance } from 'fastify';
import type { AddressInfo } from 'node:net';
import type { CallToolResult } from '@modelcontextprotocol/server';
import WebSocket from 'ws';
import type { Caller } from './route-call.js';
import { routeErrorResult } from './route-call.js';
import { mcpCallMark } from '../plugins/inner-calls.js';

const OUTPUT_CAP = 256 * 1024;

export interface ExecInput {
  id: string;
  command: string[];
  timeoutS?: number;
}

/** `ws://` to this process's own API listener (loopback when it listens on all addresses). */
function ownListener(app: FastifyInstance): string {
  const a = app.server.address() as AddressInfo;
  const host =
    a.address === '::' || a.address === '0.0.0.0'
      ? '127.0.0.1'
      : a.family === 'IPv6'
        ? `[${a.address}]`
        : a.address;
  return `ws://${host}:${a.port}`;
}

class Output {
  text = '';
  truncated = false;
  add(chunk: Buffer): void {
    if (this.text.length >= OUTPUT_CAP) {
      this.truncated = true;
      return;
    }
    this.text += chunk.toString('utf8');
  }
}

export function callExec(
  app: FastifyInstance,
  caller: Caller,
  input: ExecInput,
): Promise<CallToolResult> {
  const query = new URLSearchParams({ tty: 'false' });
  for (const arg of input.command) query.append('cmd', arg);
  const url = `${ownListener(app)}/v1/machines/${encodeURIComponent(input.id)}/exec?${query}`;
  const headers: Record<string, string> = {
    authorization: caller.authorization,
    'x-request-id': caller.requestId,
    ...mcpCallMark(),
  };
  if (caller.orgHeader) headers['x-platform-org'] = caller.orgHeader;

  return new Promise((resolve) => {
    const ws = new WebSocket(url, { headers });
    const out = { 1: new Output(), 2: new Output() };
    let exit: { code: number | null; signal: string | null } | undefined;
    let failure: string | undefined;
    const timer = setTimeout(
      () => {
        failure = `The command ran longer than ${input.timeoutS ?? 60} s and was stopped.`;
        ws.terminate();
      },
      (input.timeoutS ?? 60) * 1000,
    );
    ws.on('unexpected-response', (_req, res) => {
      clearTimeout(timer);
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () =>
        resolve(routeErrorResult(res.statusCode ?? 502, Buffer.concat(chunks).toString())),
      );
    });
    ws.on('open', () => ws.send(JSON.stringify({ type: 'eof' })));
    ws.on('message', (data: Buffer, binary) => {
      if (binary) {
        const channel = data[0];
        if (channel === 1 || channel === 2) out[channel].add(data.subarray(1));
        return;
      }
      const msg = JSON.parse(data.toString()) as { type?: string; error?: string };
      if (msg.type === 'exit') exit = msg as typeof exit;
      else if (msg.type === 'error') failure = msg.error;
    });
    ws.on('error', (err) => {
      failure ??= err.message;
    });
    ws.on('close', () => {
      clearTimeout(timer);
      const answer = {
        exitCode: exit?.code ?? null,
        signal: exit?.signal ?? null,
        stdout: out[1].text,
        stderr: out[2].text,
        ...(out[1].truncated || out[2].truncated ? { truncated: true } : {}),
        ...(failure ? { error: failure } : {}),
      };
      resolve({
        isError: failure !== undefined || exit === undefined,
        content: [{ type: 'text', text: JSON.stringify(answer) }],
      });
    });
  });
}
