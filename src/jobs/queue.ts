/**
 * The durable job table. A job is enqueued with the executor of the transaction that
 * makes the change it belongs to, so the change and its job commit together or not at
 * all: there is no moment where a resource exists without the work that finishes it.
 */
import { sql } from 'kysely';
import type { Executor } from '../store/db.js';
import type { JobCatalogue } from './catalogue.js';

export interface EnqueueOptions {
  /** Earliest start. */
  runAt?: Date;
  /** At most one queued or running job of this kind with this key. */
  dedupeKey?: string;
}

export interface JobRow {
  id: number;
  kind: string;
  payload: unknown;
  state: 'queued' | 'running' | 'done' | 'failed';
  attempts: number;
  max_attempts: number;
  steps: Record<string, unknown>;
  last_error: string | null;
}

export async function enqueue(
  ex: Executor,
  catalogue: JobCatalogue,
  kind: string,
  payload: unknown,
  opts: EnqueueOptions = {},
): Promise<number | undefined> {
  const def = catalogue.get(kind);
  if (!def) throw new Error(`unknown job kind ${kind}`);
  const checked = def.payload.parse(payload);
  const row = await ex
    .insertInto('jobs')
    .values({
      kind,
      payload: JSON.stringify(checked),
      max_attempts: def.maxAttempts,
      run_at: opts.runAt ?? (sql<Date>`now()` as unknown as Date),
      dedupe_key: opts.dedupeKey ?? null,
      locked_by: null,
      locked_until: null,
      last_error: null,
      finished_at: null,
    })
    .onConflict((oc) =>
      oc
        .columns(['kind', 'dedupe_key'])
        .where('dedupe_key', 'is not', null)
        .where('state', 'in', ['queued', 'running'])
        .doNothing(),
    )
    // The NOTIFY rides in the insert's own statement: evaluated only for a row inserted
    // (not for a duplicate), and no round trip of its own. Inside a transaction PostgreSQL
    // delivers it only at commit: workers wake exactly when the job becomes visible.
    .returning(['id', sql<void>`pg_notify('pier_jobs', '')`.as('notified')])
    .executeTakeFirst();
  return row ? Number(row.id) : undefined;
}

/**
 * Takes the next runnable job: a queued one whose time has come, or a running one whose
 * worker stopped renewing its lease (it crashed). SKIP LOCKED lets many workers poll
 * the same table without waiting on each other.
 */
export async function claimNext(
  ex: Executor,
  kinds: string[],
  workerId: string,
  leaseMs: number,
): Promise<JobRow | undefined> {
  if (kinds.length === 0) return undefined;
  const result = await sql<JobRow>`
    UPDATE jobs SET state = 'running', attempts = attempts + 1, locked_by = ${workerId},
      locked_until = now() + make_interval(secs => ${leaseMs / 1000})
    WHERE id = (
      SELECT id FROM jobs
      WHERE kind = ANY(${kinds}) AND run_at <= now()
        AND (state = 'queued'
          OR (state = 'running' AND locked_until < now() AND attempts < max_attempts))
      ORDER BY run_at, id
      FOR UPDATE SKIP LOCKED
      LIMIT 1)
    RETURNING id, kind, payload, state, attempts, max_attempts, steps, last_error`.execute(ex);
  return result.rows[0];
}

/**
 * Jobs whose worker died on their last allowed try (a crash, not an error it could
 * record) are failed here, so a job that kills its worker is not retried forever.
 */
export async function failExhausted(ex: Executor): Promise<void> {
  await sql`UPDATE jobs SET state = 'failed', finished_at = now(), locked_by = NULL,
      last_error = coalesce(last_error, 'the worker stopped during the last try')
    WHERE state = 'running' AND locked_until < now() AND attempts >= max_attempts`.execute(ex);
}

/** Extends the claim of every job this worker holds. */
export async function renewLeases(ex: Executor, workerId: string, leaseMs: number): Promise<void> {
  await sql`UPDATE jobs SET locked_until = now() + make_interval(secs => ${leaseMs / 1000})
    WHERE state = 'running' AND locked_by = ${workerId}`.execute(ex);
}

/** Records a finished step, only while this worker still holds the job. */
export async function recordStep(
  ex: Executor,
  id: number,
  workerId: string,
  name: string,
  value: unknown,
): Promise<void> {
  const res =
    await sql`UPDATE jobs SET steps = steps || jsonb_build_object(${name}::text, ${JSON.stringify(
      value ?? null,
    )}::jsonb) WHERE id = ${id} AND locked_by = ${workerId}`.execute(ex);
  if (res.numAffectedRows === 0n) throw new Error(`job ${id} is no longer held by this worker`);
}

export async function markDone(ex: Executor, id: number, workerId: string): Promise<void> {
  await ex
    .updateTable('jobs')
    .set({ state: 'done', finished_at: new Date(), locked_by: null, locked_until: null })
    .where('id', '=', id)
    .where('locked_by', '=', workerId)
    .execute();
}

/** Records a failed try: back to the queue after `retryInMs`, or failed for good. */
export async function markFailed(
  ex: Executor,
  job: JobRow,
  workerId: string,
  error: string,
  retryInMs: number | undefined,
): Promise<void> {
  const final = retryInMs === undefined;
  await ex
    .updateTable('jobs')
    .set({
      state: final ? 'failed' : 'queued',
      last_error: error.slice(0, 2000),
      locked_by: null,
      locked_until: null,
      run_at: final ? new Date() : new Date(Date.now() + retryInMs),
      finished_at: final ? new Date() : null,
    })
    .where('id', '=', job.id)
    .where('locked_by', '=', workerId)
    .execute();
}

export async function getJob(ex: Executor, id: number): Promise<JobRow | undefined> {
  return (await ex
    .selectFrom('jobs')
    .select(['id', 'kind', 'payload', 'state', 'attempts', 'max_attempts', 'steps', 'last_error'])
    .where('id', '=', id)
    .executeTakeFirst()) as JobRow | undefined;
}
