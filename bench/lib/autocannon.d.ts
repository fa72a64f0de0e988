// The part of autocannon's programmatic API the benchmarks use (the package ships no types).
declare module 'autocannon' {
  import type { EventEmitter } from 'node:events';

  namespace autocannon {
    interface Options {
      url: string;
      connections?: number;
      duration?: number;
      pipelining?: number;
      timeout?: number;
      method?: string;
      headers?: Record<string, string>;
      body?: string;
      /** Requests per second of each connection. */
      connectionRate?: number;
      /** A cycle of requests per connection; `setupRequest` shapes each from its context. */
      requests?: {
        method?: string;
        setupRequest?: (
          req: Record<string, unknown>,
          context: Record<string, unknown>,
        ) => Record<string, unknown>;
        onResponse?: (status: number, body: string, context: Record<string, unknown>) => void;
      }[];
    }

    /** hdr-histogram-percentiles-obj: latencies in ms (integer resolution), counts per second. */
    interface Histogram {
      average: number;
      mean: number;
      stddev: number;
      min: number;
      max: number;
      total: number;
      p50: number;
      p99: number;
    }

    interface Result {
      url: string;
      duration: number;
      requests: Histogram & { sent: number };
      latency: Histogram;
      throughput: Histogram;
      errors: number;
      timeouts: number;
      non2xx: number;
      statusCodeStats: Record<string, { count: number }>;
    }

    interface Instance extends EventEmitter, PromiseLike<Result> {
      stop(): void;
      on(
        event: 'response',
        listener: (
          client: unknown,
          statusCode: number,
          resBytes: number,
          responseTimeMs: number,
        ) => void,
      ): this;
      on(event: string, listener: (...args: unknown[]) => void): this;
    }
  }

  function autocannon(opts: autocannon.Options): autocannon.Instance;
  export = autocannon;
}
