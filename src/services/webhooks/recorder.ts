/**
 * Writes finished attempts in batches: every attempt that ends while a batch is being
 * written waits for the next one, so a busy dispatcher commits (and waits for the WAL
 * flush) once per batch instead of once per delivery, while a quiet one writes each
 * attempt at once. One batch is one transaction: each delivery's next step and its
 * attempt row in one statement, then the end of every webhook that answered 410.
 */
import { sql } from 'kysely';
import type { Db } from '../../store/db.js';
import { retryDelayMs } from './schedule.js';
import type { AttemptResult } from './send.js';

export type Outcome = 'succeeded' | 'retry' | 'failed' | 'disabled';

export interface FinishedAttempt {
  deliveryId: string;
  webhookId: string;
  /** 1-based: the delivery's attempts before this one, plus one. */
  attempt: number;
  startedAt: Date;
  result: AttemptResult;
}

interface Decided extends FinishedAttempt {
  outcome: Outcome;
  /** Until the next attempt, when there is one. */
  delayMs?: number;
}

/** What follows an attempt: done, another try (when), failed for good, or the webhook's end. */
export function decide(a: FinishedAttempt, retryScale: number): Decided {
  if (a.result.ok) return { ...a, outcome: 'succeeded' };
  if (a.result.status === 410) return { ...a, outcome: 'disabled' };
  const delayMs = retryDelayMs(a.attempt, retryScale, a.result.retryAfterMs);
  return delayMs === undefined ? { ...a, outcome: 'failed' } : { ...a, outcome: 'retry', delayMs };
}

export class AttemptRecorder {
  private queue: { attempt: Decided; done: (err?: unknown) => void }[] = [];
  private writing: Promise<void> | undefined;

  constructor(
    private readonly db: Db,
    /** Only rows this dispatcher still holds are written (a lapsed lease lost them). */
    private readonly holder: string,
    private readonly retryScale: number,
  ) {}

  /** Resolves with the decision once the attempt is committed. */
  add(attempt: FinishedAttempt): Promise<Decided> {
    const decided = decide(attempt, this.retryScale);
    return new Promise((resolve, reject) => {
      this.queue.push({ attempt: decided, done: (err) => (err ? reject(err) : resolve(decided)) });
      this.writing ??= this.drain();
    });
  }

  /** Resolves when everything added so far is written (or failed). */
  async idle(): Promise<void> {
    while (this.writing) await this.writing;
  }

  private async drain(): Promise<void> {
    try {
      while (this.queue.length > 0) {
        const batch = this.queue.splice(0);
        try {
          await this.write(batch.map((b) => b.attempt));
          for (const b of batch) b.done();
        } catch (err) {
          for (const b of batch) b.done(err);
        }
      }
    } finally {
      this.writing = undefined;
    }
  }

  private async write(batch: Decided[]): Promise<void> {
    const col = <T>(f: (d: Decided) => T) => batch.map(f);
    await this.db.transaction().execute(async (tx) => {
      await sql`
        WITH input AS (
          SELECT * FROM unnest(
            ${col((d) => d.deliveryId)}::text[], ${col((d) => d.attempt)}::int[],
            ${col((d) => d.outcome)}::text[], ${col((d) => d.delayMs ?? null)}::float8[],
            ${col((d) => d.result.status ?? null)}::int[], ${col((d) => d.result.error ?? null)}::text[],
            ${col((d) => d.startedAt.toISOString())}::timestamptz[],
            ${col((d) => d.result.durationMs)}::int[]
          ) AS t(id, attempt, outcome, delay_ms, response_status, error, started_at, duration_ms)
        ), updated AS (
          UPDATE webhook_deliveries d SET attempts = i.attempt,
            status = CASE i.outcome WHEN 'retry' THEN 'pending'
              WHEN 'succeeded' THEN 'succeeded' ELSE 'failed' END,
            next_attempt_at = CASE WHEN i.delay_ms IS NULL THEN NULL
              ELSE now() + make_interval(secs => i.delay_ms / 1000) END,
            locked_by = NULL, locked_until = NULL,
            response_status = i.response_status, error = i.error,
            finished_at = CASE i.outcome WHEN 'retry' THEN NULL ELSE now() END
          FROM input i
          WHERE d.id = i.id AND d.locked_by = ${this.holder}
          RETURNING d.id, d.next_attempt_at)
        INSERT INTO webhook_attempts (delivery_id, attempt, started_at, duration_ms,
          response_status, error, outcome, next_attempt_at)
        SELECT i.id, i.attempt, i.started_at, i.duration_ms, i.response_status, i.error,
          i.outcome, u.next_attempt_at
        FROM input i JOIN updated u ON u.id = i.id`.execute(tx);
      const gone = batch.filter((d) => d.outcome === 'disabled');
      if (gone.length === 0) return;
      // 410 Gone: the endpoint says it is gone for good; its other pending deliveries end too.
      const webhooks = [...new Set(gone.map((d) => d.webhookId))];
      await sql`UPDATE webhooks SET enabled = false, disabled_at = now(),
          disabled_reason = 'the endpoint answered 410 Gone'
        WHERE id = ANY(${webhooks}::text[])`.execute(tx);
      // Attempts of theirs under way lose their claim: they are not recorded.
      await sql`UPDATE webhook_deliveries SET status = 'cancelled', next_attempt_at = NULL,
          locked_by = NULL, locked_until = NULL, finished_at = now(),
          error = 'the webhook was disabled (410 Gone)'
        WHERE webhook_id = ANY(${webhooks}::text[]) AND status = 'pending'`.execute(tx);
    });
  }
}
