/**
 * Sends due deliveries (docs/webhooks.md). The schedule is the `webhook_deliveries`
 * table: each replica's dispatcher claims due rows with FOR UPDATE SKIP LOCKED, marks
 * them as its own until a lease runs out, sends, and records the attempt and the next
 * one in one transaction. It wakes on NOTIFY (an event's transaction sends it at commit,
 * so the first attempt starts within milliseconds), on a timer for retries it scheduled
 * itself, and polls as a backstop.
 *
 * A dispatcher that dies mid-attempt leaves its rows claimed until the lease lapses;
 * then any dispatcher takes them again and the same message (same `webhook-id`) is sent
 * once more: delivery is at least once, and receivers deduplicate on the id. A graceful
 * stop hands its rows back at once without recording the attempts it cut short.
 *
 * This is not a job of the jobs queue: attempts wait on other people's servers for up to
 * the timeout each, and would hold the few worker slots other work needs; here they have
 * their own bound (`concurrency`) and cost one small row each.
 */
import { randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import type pg from 'pg';
import type { Logger } from 'pino';
import type { SecretBox } from '../../crypto/secret-box.js';
import type { OutboundGuard } from '../../host/outbound-guard.js';
import type { Db } from '../../store/db.js';
import { crashPoint } from '../../jobs/crash-points.js';
import { AttemptRecorder } from './recorder.js';
import { WEBHOOKS_CHANNEL, secretBinding } from './records.js';
import { attemptDelivery } from './send.js';

/** The crash points of a delivery (test only, jobs/crash-points.ts): not a job, but as durable. */
export const DELIVERY_POINTS = 'webhooks.delivery';

export interface DispatcherOptions {
  db: Db;
  pool: pg.Pool;
  box: SecretBox;
  guard: OutboundGuard;
  log: Logger;
  /** One attempt's limit (PIER_WEBHOOK_TIMEOUT_MS). */
  timeoutMs: number;
  /** Factor on the retry schedule (PIER_WEBHOOK_RETRY_SCALE). */
  retryScale: number;
  /** Attempts under way at once in this replica. */
  concurrency: number;
  /** How long a claim holds without being recorded; default: twice the timeout + 10 s. */
  leaseMs?: number;
  /** The backstop poll. */
  pollMs?: number;
}

/** How long the end of an attempt waits for others before slots are filled again. */
const CLAIM_COALESCE_MS = 5;

interface Claimed {
  id: string;
  webhook_id: string;
  event_id: string;
  attempts: number;
  url: string;
  secret_nonce: Buffer;
  secret_ciphertext: Buffer;
  payload: string;
}

export class WebhookDispatcher {
  readonly id = `wd-${randomBytes(6).toString('hex')}`;
  private readonly inflight = new Set<Promise<void>>();
  private readonly abort = new AbortController();
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly leaseMs: number;
  private readonly recorder: AttemptRecorder;
  private readonly pollMs: number;
  private poll: NodeJS.Timeout | undefined;
  private listener: pg.PoolClient | undefined;
  private filling: Promise<void> | undefined;
  private again = false;
  private soon: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(private readonly opts: DispatcherOptions) {
    this.leaseMs = opts.leaseMs ?? opts.timeoutMs * 2 + 10_000;
    this.pollMs = opts.pollMs ?? 1000;
    this.recorder = new AttemptRecorder(opts.db, this.id, opts.retryScale);
  }

  async start(): Promise<void> {
    this.listener = await this.opts.pool.connect();
    this.listener.on('notification', () => this.poke());
    // A lost LISTEN connection only costs latency: the poll still finds the work.
    this.listener.on('error', (err) => this.opts.log.warn({ err }, 'webhook LISTEN lost'));
    await this.listener.query(`LISTEN ${WEBHOOKS_CHANNEL}`);
    this.poll = setInterval(() => this.poke(), this.pollMs);
    this.poke();
  }

  /** Looks for due deliveries now (a second call while one looks makes it look again). */
  poke(): void {
    if (this.stopped) return;
    if (this.filling) {
      this.again = true;
      return;
    }
    this.filling = this.fill()
      .catch((err) => this.opts.log.warn({ err }, 'webhook claim failed'))
      .finally(() => {
        this.filling = undefined;
        if (this.again) {
          this.again = false;
          this.poke();
        }
      });
  }

  /**
   * A poke a moment later, shared by every attempt that ends meanwhile: one claim then
   * fills all the slots they freed, instead of one claim (and one commit) per attempt.
   */
  private pokeSoon(): void {
    if (this.soon) return;
    this.soon = setTimeout(() => {
      this.soon = undefined;
      this.poke();
    }, CLAIM_COALESCE_MS);
  }

  private async fill(): Promise<void> {
    while (!this.stopped && this.inflight.size < this.opts.concurrency) {
      const free = this.opts.concurrency - this.inflight.size;
      const batch = await this.claim(free);
      for (const row of batch) {
        const p: Promise<void> = this.deliver(row)
          .catch((err) =>
            // The row stays claimed; its lease lapses and the attempt is made again.
            this.opts.log.error({ err, deliveryId: row.id }, 'webhook attempt not recorded'),
          )
          .finally(() => {
            this.inflight.delete(p);
            this.pokeSoon();
          });
        this.inflight.add(p);
      }
      // Fewer than asked for: nothing more is due now (NOTIFY or the poll say when).
      if (batch.length < free) return;
    }
  }

  /**
   * Claims up to `n` due deliveries. The claim commits without waiting for the WAL flush:
   * a claim lost in a crash of PostgreSQL only means the delivery is claimed again, which
   * a crash of ours means anyway.
   */
  private async claim(n: number): Promise<Claimed[]> {
    return this.opts.db.transaction().execute(async (tx) => {
      await sql`SET LOCAL synchronous_commit = off`.execute(tx);
      const { rows } = await sql<Claimed>`
      WITH claimed AS (
        UPDATE webhook_deliveries SET locked_by = ${this.id},
          locked_until = now() + make_interval(secs => ${this.leaseMs / 1000})
        WHERE id IN (
          SELECT id FROM webhook_deliveries
          WHERE status = 'pending' AND next_attempt_at <= now()
            AND (locked_until IS NULL OR locked_until < now())
          ORDER BY next_attempt_at
          LIMIT ${n}
          FOR UPDATE SKIP LOCKED)
        RETURNING id, webhook_id, event_id, attempts)
      SELECT c.id, c.webhook_id, c.event_id, c.attempts, w.url, w.secret_nonce,
        w.secret_ciphertext, e.payload
      FROM claimed c
      JOIN webhooks w ON w.id = c.webhook_id
      JOIN webhook_events e ON e.id = c.event_id`.execute(tx);
      return rows;
    });
  }

  private async deliver(row: Claimed): Promise<void> {
    await crashPoint(DELIVERY_POINTS, 'claimed', row.attempts + 1);
    const secret = this.opts.box.open(
      { nonce: row.secret_nonce, ciphertext: row.secret_ciphertext },
      secretBinding(row.webhook_id),
    );
    const startedAt = new Date();
    const result = await attemptDelivery(this.opts.guard, {
      url: row.url,
      secret,
      messageId: row.event_id,
      body: row.payload,
      timeoutMs: this.opts.timeoutMs,
      signal: this.abort.signal,
    });
    // Cut short by a stop: not an attempt of the endpoint's; stop() hands the row back.
    if (this.stopped) return;
    await crashPoint(DELIVERY_POINTS, 'sent', row.attempts + 1);
    const decided = await this.recorder.add({
      deliveryId: row.id,
      webhookId: row.webhook_id,
      attempt: row.attempts + 1,
      startedAt,
      result,
    });
    await crashPoint(DELIVERY_POINTS, 'recorded', row.attempts + 1);
    if (decided.delayMs !== undefined && decided.delayMs < this.pollMs)
      this.wakeIn(decided.delayMs);
  }

  private wakeIn(ms: number): void {
    const t = setTimeout(() => {
      this.timers.delete(t);
      this.poke();
    }, ms);
    t.unref();
    this.timers.add(t);
  }

  /** Stops claiming, cuts attempts short and hands their rows back for the next start. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.poll);
    for (const t of this.timers) clearTimeout(t);
    clearTimeout(this.soon);
    this.abort.abort();
    await this.filling;
    await Promise.allSettled([...this.inflight]);
    await this.recorder.idle();
    await sql`UPDATE webhook_deliveries SET locked_by = NULL, locked_until = NULL
      WHERE locked_by = ${this.id} AND status = 'pending'`
      .execute(this.opts.db)
      .catch((err) => this.opts.log.warn({ err }, 'webhook claims not handed back'));
    if (this.listener) {
      await this.listener.query(`UNLISTEN ${WEBHOOKS_CHANNEL}`).catch(() => {});
      this.listener.release();
    }
  }
}
