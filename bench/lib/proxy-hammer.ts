/**
 * Closed-loop load through pier's proxy for as long as a benchmark needs it (a deploy has
 * no fixed length, so autocannon's fixed runs do not fit): `connections` keep-alive
 * clients, each sending its next GET when the last one is answered. Every answer is
 * recorded in the phase current when it was sent, with its latency (microsecond
 * resolution), so that "before" and "during" come from one unbroken load. pier runs in a
 * process of its own (lib/machine-pier.ts): this loop does not share its event loop.
 */
import http from 'node:http';
import { performance } from 'node:perf_hooks';
import type { LoadResult } from './load.js';
import { percentile } from './db-samples.js';

interface Phase {
  name: string;
  startedAt: number;
  endedAt?: number;
  latenciesMs: number[];
  /** Answered 200, by body. */
  bodies: Map<string, number>;
  /** Anything else: status and body, or the socket error. */
  failures: string[];
}

export class ProxyHammer {
  private readonly agent: http.Agent;
  private readonly phases: Phase[] = [];
  private current: Phase;
  private stopped = false;
  private readonly loops: Promise<void>[];

  constructor(
    private readonly url: string,
    private readonly host: string,
    connections: number,
    first: string,
  ) {
    this.agent = new http.Agent({ keepAlive: true, maxSockets: connections });
    this.current = this.open(first);
    this.loops = Array.from({ length: connections }, () => this.loop());
  }

  /** Ends the current phase and starts `name`. */
  phase(name: string): void {
    this.current.endedAt = performance.now();
    this.current = this.open(name);
  }

  /** Stops the clients (waits for their last answers) and frees the sockets. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.current.endedAt = performance.now();
    await Promise.all(this.loops);
    this.agent.destroy();
  }

  get(name: string): Phase {
    const p = this.phases.find((x) => x.name === name);
    if (!p) throw new Error(`no phase ${name}`);
    return p;
  }

  /** Every failure of every phase, with its phase. */
  failures(): string[] {
    return this.phases.flatMap((p) => p.failures.map((f) => `${p.name}: ${f}`));
  }

  /** The phase as a LoadResult (throughput over its length, p50/p99 of its answers). */
  result(name: string): LoadResult {
    const p = this.get(name);
    const durationS = ((p.endedAt ?? performance.now()) - p.startedAt) / 1000;
    const sorted = [...p.latenciesMs].sort((a, b) => a - b);
    return {
      requestsPerSec: sorted.length / durationS,
      p50Ms: sorted.length ? percentile(sorted, 50) : 0,
      p99Ms: sorted.length ? percentile(sorted, 99) : 0,
      non2xx: p.failures.filter((f) => /^\d{3} /.test(f)).length,
      errors: p.failures.filter((f) => !/^\d{3} /.test(f)).length,
      requests: sorted.length,
      durationS,
    };
  }

  private open(name: string): Phase {
    const p: Phase = {
      name,
      startedAt: performance.now(),
      latenciesMs: [],
      bodies: new Map(),
      failures: [],
    };
    this.phases.push(p);
    return p;
  }

  private async loop(): Promise<void> {
    while (!this.stopped) {
      const phase = this.current;
      const sent = performance.now();
      try {
        const r = await this.request();
        if (r.status === 200) {
          phase.latenciesMs.push(performance.now() - sent);
          phase.bodies.set(r.text, (phase.bodies.get(r.text) ?? 0) + 1);
        } else phase.failures.push(`${r.status} ${r.text.slice(0, 200)}`);
      } catch (err) {
        phase.failures.push((err as Error).message);
      }
    }
  }

  private request(): Promise<{ status: number; text: string }> {
    return new Promise((resolve, reject) => {
      const req = http.get(
        this.url,
        { agent: this.agent, headers: { host: this.host }, timeout: 10_000 },
        (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (c: string) => (text += c));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
          res.on('error', reject);
        },
      );
      req.on('timeout', () => req.destroy(new Error('timed out after 10 s')));
      req.on('error', reject);
    });
  }
}
