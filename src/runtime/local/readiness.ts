/**
 * When a started machine counts as ready: for `port`, once its internal port accepts a
 * TCP connection from the host (the bridge reaches every machine), and with a health
 * check path once an HTTP GET answers 2xx or 3xx `healthyThreshold` times in a row. The
 * wait ends early when the process exits, and is bounded as a whole.
 */
import http from 'node:http';
import net from 'node:net';
import type { ExitStatus } from '../sandbox/index.js';
import type { MachineSpec } from '../runtime.js';

/** The default bound of a readiness wait, without a health check's maxWaitMs. */
export const DEFAULT_MAX_WAIT_MS = 60_000;

/**
 * How often the port is tried before it first accepts: every 2 ms at first, since bootMs
 * counts the wait and most servers listen within milliseconds (runc alone takes some
 * 150 ms), then half again as long each time up to 5 ms during the first second, so a
 * port that opens is seen within a few ms; after it up to 50 ms, so a slow starter is
 * not hammered. A try is one connect over the bridge, refused at once.
 */
const PORT_POLL_FIRST_MS = 2;
const PORT_POLL_EARLY_MAX_MS = 5;
const PORT_POLL_EARLY_FOR_MS = 1_000;
const PORT_POLL_MAX_MS = 50;

/** What a readiness wait ended with. */
export type Readiness = { ready: true } | { ready: false; exit: ExitStatus } | { ready: false };

/** What `waitReady` needs besides the spec. */
export interface ReadinessOptions {
  host: string;
  /** The process's exit status once it has ended, undefined while it runs. */
  exited: () => Promise<ExitStatus | undefined>;
  signal?: AbortSignal;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Whether `host:port` accepts a TCP connection within `timeoutMs`. */
export function tcpOpen(host: string, port: number, timeoutMs: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

/** Whether a GET of `path` answers 2xx or 3xx (redirects are not followed) within `timeoutMs`. */
export function httpOk(
  host: string,
  port: number,
  path: string,
  timeoutMs: number,
): Promise<boolean> {
  return new Promise((resolve) => {
    const req = http.get(
      {
        host,
        port,
        path,
        agent: false,
        timeout: timeoutMs,
        headers: { 'user-agent': 'pier-health' },
      },
      (res) => {
        const status = res.statusCode ?? 0;
        res.resume();
        req.destroy();
        resolve(status >= 200 && status < 400);
      },
    );
    req.once('timeout', () => req.destroy());
    req.once('error', () => resolve(false));
  });
}

/**
 * Waits until the machine is ready by `spec`'s rule, its process exits, or
 * `healthCheck.maxWaitMs` (default 60 s) passes. A `boot` machine is ready at once.
 * Rejects with the signal's reason when aborted.
 */
export async function waitReady(spec: MachineSpec, opts: ReadinessOptions): Promise<Readiness> {
  if (spec.readiness === 'boot') return { ready: true };
  const check = spec.healthCheck;
  const deadline = Date.now() + (check?.maxWaitMs ?? DEFAULT_MAX_WAIT_MS);
  const port = spec.internalPort;
  const path = check?.path?.startsWith('/') ? check.path : `/${check?.path ?? ''}`;
  let portOpen = false;
  let streak = 0;
  let pause = PORT_POLL_FIRST_MS;
  const early = Date.now() + PORT_POLL_EARLY_FOR_MS;
  for (;;) {
    opts.signal?.throwIfAborted();
    const exit = await opts.exited();
    if (exit) return { ready: false, exit };
    const left = deadline - Date.now();
    if (left <= 0) return { ready: false };
    if (!portOpen) {
      portOpen = await tcpOpen(opts.host, port, Math.min(left, 1000));
      if (portOpen && !check?.path) return { ready: true };
      if (!portOpen) {
        await sleep(Math.min(pause, Math.max(0, deadline - Date.now())));
        const most = Date.now() < early ? PORT_POLL_EARLY_MAX_MS : PORT_POLL_MAX_MS;
        pause = Math.min(most, pause * 1.5);
      }
      continue;
    }
    const ok = await httpOk(opts.host, port, path, Math.min(check!.timeoutMs, left));
    streak = ok ? streak + 1 : 0;
    if (streak >= Math.max(1, check!.healthyThreshold)) return { ready: true };
    await sleep(Math.min(check!.intervalMs, Math.max(0, deadline - Date.now())));
  }
}
