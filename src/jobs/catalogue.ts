/**
 * What a job kind is: its payload schema, how often it is tried, how long to wait
 * between tries, and its handler. Every kind the platform runs is registered in one
 * catalogue, so an unknown or malformed job is refused at enqueue time, not at run time.
 */
import type { z } from 'zod';
import type { Logger } from 'pino';

export interface JobContext {
  jobId: number;
  attempt: number;
  log: Logger;
  /** Aborted when the worker shuts down; long steps should stop and let a retry resume. */
  signal: AbortSignal;
  /**
   * Runs `fn` once per job across retries: its result is recorded, and a rerun of the
   * job after a crash gets the recorded result back instead of running it again.
   */
  step<T>(name: string, fn: () => Promise<T>): Promise<T>;
}

export interface JobDefinition<S extends z.ZodType = z.ZodType> {
  kind: string;
  payload: S;
  /** Total tries, the first included. */
  maxAttempts: number;
  /** Milliseconds to wait before try number `attempt + 1`. */
  backoffMs(attempt: number): number;
  run(payload: z.output<S>, ctx: JobContext): Promise<void>;
}

/** Exponential backoff from `baseMs`, capped, with ±20% jitter so retries spread out. */
export function exponentialBackoff(baseMs: number, capMs = 5 * 60_000) {
  return (attempt: number) => {
    const raw = Math.min(capMs, baseMs * 2 ** Math.max(0, attempt - 1));
    return Math.round(raw * (0.8 + Math.random() * 0.4));
  };
}

export function defineJob<S extends z.ZodType>(def: JobDefinition<S>): JobDefinition<S> {
  return def;
}

export class JobCatalogue {
  private readonly defs = new Map<string, JobDefinition>();

  constructor(defs: JobDefinition[] = []) {
    for (const d of defs) this.add(d);
  }

  add(def: JobDefinition): this {
    if (this.defs.has(def.kind)) throw new Error(`job kind ${def.kind} registered twice`);
    this.defs.set(def.kind, def);
    return this;
  }

  get(kind: string): JobDefinition | undefined {
    return this.defs.get(kind);
  }

  kinds(): string[] {
    return [...this.defs.keys()];
  }
}
