/**
 * Runs jobs from the durable table. Each worker claims jobs with SKIP LOCKED, renews its
 * lease while they run, and records each step's result, so a worker that dies mid-job
 * leaves a job that another worker (or this one after a restart) takes over and finishes,
 * skipping the steps already done.
 */
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type pg from 'pg';
import type { Db } from '../store/db.js';
import type { JobCatalogue, JobContext } from './catalogue.js';
import {
  claimNext,
  failExhausted,
  markDone,
  markFailed,
  recordStep,
  renewLeases,
  type JobRow,
} from './queue.js';
import { sql } from 'kysely';
import { crashPoint } from './crash-points.js';

export const JOBS_CHANNEL = 'pier_jobs';

export interface WorkerOptions {
  db: Db;
  pool: pg.Pool;
  catalogue: JobCatalogue;
  log: Logger;
  leaseMs: number;
  concurrency?: number;
  pollMs?: number;
}

export class JobWorker {
  readonly id = `w-${randomBytes(6).toString('hex')}`;
  private readonly running = new Map<number, Promise<void>>();
  private readonly abort = new AbortController();
  private timer: NodeJS.Timeout | undefined;
  private heartbeat: NodeJS.Timeout | undefined;
  private listener: pg.PoolClient | undefined;
  private polling = false;
  private stopped = false;
  /** Work may be waiting (a notice, a tick) that no claim has looked for yet. */
  private wanted = false;
  /** The last look stopped at the concurrency limit, not at an empty queue. */
  private full = false;
  /** The next look first fails the jobs whose worker died on their last try. */
  private reap = false;

  constructor(private readonly opts: WorkerOptions) {}

  async start(): Promise<void> {
    const { pool, leaseMs } = this.opts;
    // NOTIFY wakes the worker as soon as a job is enqueued; polling is the fallback.
    this.listener = await pool.connect();
    this.listener.on('notification', () => this.poke());
    this.listener.on('error', () => {});
    await this.listener.query(`LISTEN ${JOBS_CHANNEL}`);
    // The tick also reaps jobs whose worker died on their last try: once a tick, not on
    // every notice (one per enqueued job), which is where the load is.
    this.timer = setInterval(() => this.poke(true), this.opts.pollMs ?? 1000);
    this.heartbeat = setInterval(
      () => {
        if (this.running.size > 0) {
          renewLeases(this.opts.db, this.id, leaseMs).catch((err) =>
            this.opts.log.warn({ err }, 'job lease renewal failed'),
          );
        }
      },
      Math.max(100, Math.floor(leaseMs / 3)),
    );
    this.poke(true);
  }

  /**
   * Looks for work now; `reap` first fails the jobs whose worker died on their last try.
   * A poke during a look is not lost: the look goes round once more.
   */
  poke(reap = false): void {
    this.wanted = true;
    this.reap ||= reap;
    if (this.stopped || this.polling) return;
    this.polling = true;
    this.fill()
      .catch((err) => this.opts.log.warn({ err }, 'job poll failed'))
      .finally(() => {
        this.polling = false;
        if (this.wanted) this.poke();
      });
  }

  private async fill(): Promise<void> {
    this.wanted = false;
    if (this.reap) {
      this.reap = false;
      await failExhausted(this.opts.db);
    }
    const max = this.opts.concurrency ?? 4;
    this.full = false;
    while (!this.stopped) {
      if (this.running.size >= max) {
        this.full = true;
        return;
      }
      const job = await claimNext(
        this.opts.db,
        this.opts.catalogue.kinds(),
        this.id,
        this.opts.leaseMs,
      );
      if (!job) return;
      // A failure to even record the outcome (database gone) must not end the process:
      // the lease lapses and the job is taken again.
      const p = this.execute(job)
        .catch((err) => this.opts.log.error({ err, jobId: job.id }, 'job outcome not recorded'))
        .finally(() => {
          this.running.delete(job.id);
          // A free place matters only if the last look left jobs for lack of one: after
          // an empty queue, new jobs announce themselves (NOTIFY) and the tick finds the
          // rest (retries, jobs due later), so no empty claim follows every job.
          if (this.full) this.poke();
        });
      this.running.set(job.id, p);
    }
  }

  private async execute(job: JobRow): Promise<void> {
    const { db, catalogue } = this.opts;
    const log = this.opts.log.child({ jobId: job.id, kind: job.kind, attempt: job.attempts });
    const def = catalogue.get(job.kind);
    const steps = { ...job.steps };
    const ctx: JobContext = {
      jobId: job.id,
      attempt: job.attempts,
      log,
      signal: this.abort.signal,
      step: async <T>(name: string, fn: () => Promise<T>): Promise<T> => {
        if (name in steps) return steps[name] as T;
        const value = await fn();
        await crashPoint(job.kind, `${name}:ran`, job.attempts);
        await recordStep(db, job.id, this.id, name, value);
        await crashPoint(job.kind, `${name}:recorded`, job.attempts);
        steps[name] = value ?? null;
        return value;
      },
    };
    try {
      if (!def) throw new Error(`no handler for job kind ${job.kind}`);
      await crashPoint(job.kind, 'claimed', job.attempts);
      await def.run(def.payload.parse(job.payload), ctx);
      await crashPoint(job.kind, 'ran', job.attempts);
      await markDone(db, job.id, this.id);
      log.info('job done');
    } catch (err) {
      if (this.stopped) return; // shutting down: the job is handed back in stop()
      const retry =
        def && job.attempts < job.max_attempts ? def.backoffMs(job.attempts) : undefined;
      log.warn(
        { err, retryInMs: retry },
        retry === undefined ? 'job failed for good' : 'job try failed',
      );
      await markFailed(db, job, this.id, (err as Error).message ?? String(err), retry);
    }
  }

  /** Stops taking work, asks running jobs to stop, and hands back what did not finish. */
  async stop(graceMs = 5000): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    clearInterval(this.heartbeat);
    this.abort.abort();
    const all = Promise.allSettled([...this.running.values()]);
    let grace: NodeJS.Timeout | undefined;
    await Promise.race([all, new Promise((r) => (grace = setTimeout(r, graceMs)))]);
    clearTimeout(grace);
    // Unfinished jobs go straight back to the queue (this try does not count), so a
    // restart resumes them at once instead of waiting for the lease to lapse.
    await sql`UPDATE jobs SET state = 'queued', attempts = greatest(attempts - 1, 0),
      locked_by = NULL, locked_until = NULL WHERE state = 'running' AND locked_by = ${this.id}`
      .execute(this.opts.db)
      .catch(() => {});
    if (this.listener) {
      await this.listener.query(`UNLISTEN ${JOBS_CHANNEL}`).catch(() => {});
      this.listener.release();
    }
  }
}
