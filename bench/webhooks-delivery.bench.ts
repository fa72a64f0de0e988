/**
 * Webhook deliveries (issue 16) to a receiver on loopback, against a baseline of plain
 * signed HTTP POSTs from this process to the same receiver (a new connection each, as
 * pier's attempts make).
 *
 * - Throughput: events are reported through the operator route as fast as it takes them,
 *   each to WEBHOOKS webhooks; deliveries/s is every delivery received ÷ the time from
 *   the first report to the last arrival. The baseline sends as many POSTs,
 *   CONCURRENCY at a time (pier's webhookConcurrency).
 * - Latency: RATE events a second for the run's duration (open loop: sent on schedule,
 *   not after the previous answer), one webhook; each sample is the time from sending the
 *   mail event to the receiver having the delivery (the route's own time included). The
 *   baseline: POSTs on the same schedule, from send to arrival.
 *
 * The summary's req/s is deliveries/s; its p99 is the latency run's. Goal: p99 < 1 s at
 * 100 events/s.
 */
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { compare, type Benchmark } from './lib/benchmark.js';
import type { LoadResult } from './lib/load.js';
import { call, createBenchOrg, startBenchPlatform, type BenchPlatform } from './lib/platform.js';
import { machineBusy } from './lib/s3-load.js';
import { signedHeaders } from '../src/services/webhooks/signature.js';

const WEBHOOKS = 10;
const CONCURRENCY = 64;
const RATE = 100;
const THROUGHPUT_EVENTS = 400;

interface Receiver {
  url: string;
  /** Called with each request's `webhook-id` as it arrives. */
  onArrival: (id: string) => void;
  close(): Promise<void>;
}

async function startReceiver(): Promise<Receiver> {
  const receiver: Receiver = { url: '', onArrival: () => {}, close: async () => {} };
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      receiver.onArrival(String(req.headers['webhook-id']));
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  receiver.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  receiver.close = async () => {
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
  };
  return receiver;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))] ?? NaN;
}

/** A signed POST like pier's, on a connection of its own. */
function plainPost(url: string, secret: string, id: string, body: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const headers = {
      'content-type': 'application/json',
      ...signedHeaders(secret, id, Math.floor(Date.now() / 1000), body),
    };
    const req = http.request(url, { method: 'POST', headers, agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve());
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** Waits until `count()` reaches `n`, or fails after `timeoutMs`. */
async function waitCount(count: () => number, n: number, timeoutMs: number): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (count() < n) {
    if (Date.now() > end) throw new Error(`only ${count()} of ${n} deliveries arrived`);
    await sleep(5);
  }
}

/** Runs `fn(i)` for i < n, `width` at a time. */
async function pooled(n: number, width: number, fn: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < n) await fn(next++);
    }),
  );
}

/** Sends `n` things on a fixed schedule of `rate` a second; `fn` gets its index. */
async function onSchedule(
  n: number,
  rate: number,
  fn: (i: number) => Promise<void>,
): Promise<void> {
  const start = performance.now();
  const pending: Promise<void>[] = [];
  for (let i = 0; i < n; i++) {
    const due = start + (i * 1000) / rate;
    const wait = due - performance.now();
    if (wait > 0) await sleep(wait);
    pending.push(fn(i));
  }
  await Promise.all(pending);
}

interface Side {
  /** Deliveries (or POSTs) per second in the throughput run. */
  perSec: number;
  /** Send → arrival, ms, in the latency run. */
  latencies: number[];
}

function asResult(side: Side, durationS: number): LoadResult {
  const sorted = [...side.latencies].sort((a, b) => a - b);
  return {
    requestsPerSec: side.perSec,
    p50Ms: percentile(sorted, 50),
    p99Ms: percentile(sorted, 99),
    non2xx: 0,
    errors: 0,
    requests: sorted.length,
    durationS,
  };
}

async function measurePier(
  pier: BenchPlatform,
  receiver: Receiver,
  settings: { events: number; latencyEvents: number },
): Promise<Side> {
  const org = await createBenchOrg(pier);
  const hooks: string[] = [];
  for (let i = 0; i < WEBHOOKS; i++) {
    const kind = i === 0 ? ['email.sent', 'email.delivered'] : ['email.sent'];
    const made = (await call(
      pier.url,
      org.token,
      'POST',
      '/v1/webhooks',
      {
        url: `${receiver.url}/h${i}`,
        events: kind,
      },
      201,
    )) as { id: string };
    hooks.push(made.id);
  }
  const mailEvent = (kind: string) =>
    fetch(`${pier.url}/admin/v1/orgs/${org.id}/mail-events`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${pier.operatorToken}`,
        'content-type': 'application/json',
      },
      body: JSON.stringify({ kind, data: { messageId: randomBytes(8).toString('hex') } }),
    }).then(async (res) => {
      const body = (await res.json()) as { id: string };
      if (res.status !== 202) throw new Error(`mail-events answered ${res.status}`);
      return body.id;
    });

  // Throughput: every webhook takes email.sent.
  let arrived = 0;
  receiver.onArrival = () => arrived++;
  const t0 = performance.now();
  await pooled(settings.events, 8, async () => void (await mailEvent('email.sent')));
  await waitCount(() => arrived, settings.events * WEBHOOKS, 120_000);
  const perSec = (settings.events * WEBHOOKS) / ((performance.now() - t0) / 1000);

  // Latency: only the first webhook takes email.delivered.
  const sentAt = new Map<number, number>();
  const byEvent = new Map<string, number>();
  const latencies: number[] = [];
  const early = new Map<string, number>();
  receiver.onArrival = (id) => {
    const i = byEvent.get(id);
    if (i === undefined)
      early.set(id, performance.now()); // arrived before the 202 did
    else latencies.push(performance.now() - sentAt.get(i)!);
  };
  await onSchedule(settings.latencyEvents, RATE, async (i) => {
    sentAt.set(i, performance.now());
    const id = await mailEvent('email.delivered');
    byEvent.set(id, i);
    const at = early.get(id);
    if (at !== undefined) latencies.push(at - sentAt.get(i)!);
  });
  await waitCount(() => latencies.length, settings.latencyEvents, 60_000);
  for (const id of hooks)
    await call(pier.url, org.token, 'DELETE', `/v1/webhooks/${id}`, undefined, 204);
  return { perSec, latencies };
}

async function measurePlain(
  receiver: Receiver,
  settings: { events: number; latencyEvents: number },
): Promise<Side> {
  const secret = `whsec_${randomBytes(24).toString('base64')}`;
  const body = JSON.stringify({
    type: 'email.sent',
    timestamp: new Date().toISOString(),
    data: {},
  });
  const total = settings.events * WEBHOOKS;
  receiver.onArrival = () => {};
  const t0 = performance.now();
  await pooled(total, CONCURRENCY, (i) => plainPost(`${receiver.url}/p`, secret, `m${i}`, body));
  const perSec = total / ((performance.now() - t0) / 1000);

  const sentAt = new Map<string, number>();
  const latencies: number[] = [];
  receiver.onArrival = (id) => latencies.push(performance.now() - sentAt.get(id)!);
  await onSchedule(settings.latencyEvents, RATE, (i) => {
    sentAt.set(`l${i}`, performance.now());
    return plainPost(`${receiver.url}/p`, secret, `l${i}`, body);
  });
  await waitCount(() => latencies.length, settings.latencyEvents, 60_000);
  return { perSec, latencies };
}

const benchmark: Benchmark = {
  name: 'webhooks-delivery',
  description: `webhook deliveries to a loopback receiver (${WEBHOOKS} webhooks; latency at ${RATE} events/s) vs plain signed POSTs`,
  async run({ durationS, warmupS }) {
    const receiver = await startReceiver();
    const pier = await startBenchPlatform({ allowPrivateTargets: true, servicesPort: 0 });
    try {
      const warm = { events: 50, latencyEvents: Math.max(20, Math.round(warmupS * RATE)) };
      const run = { events: THROUGHPUT_EVENTS, latencyEvents: Math.round(durationS * RATE) };
      await measurePlain(receiver, warm);
      const baseline = await measurePlain(receiver, run);
      await measurePier(pier, receiver, warm);
      const measured = await measurePier(pier, receiver, run);
      const pierResult = asResult(measured, durationS);
      return compare({
        name: benchmark.name,
        baselineLabel: 'plain signed POSTs to the same receiver',
        connections: CONCURRENCY,
        baseline: asResult(baseline, durationS),
        pier: pierResult,
        goal: { minRatio: 0.2, maxP99Ms: 1000 },
        notes: {
          store: pier.store,
          headline:
            'req/s are deliveries/s (throughput run); p50/p99 are event → arrival at 100 events/s',
          webhooks: WEBHOOKS,
          throughputDeliveries: THROUGHPUT_EVENTS * WEBHOOKS,
          latencyEvents: run.latencyEvents,
          pierP50Ms: Math.round(pierResult.p50Ms * 100) / 100,
          ...(await machineBusy()),
        },
      });
    } finally {
      await pier.close();
      await receiver.close();
    }
  },
};

export default benchmark;
