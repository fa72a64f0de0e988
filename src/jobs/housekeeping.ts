/**
 * The platform's own periodic jobs: pruning the agent audit and forgetting expired
 * short-lived credentials. They run through the durable job table like customer work,
 * deduplicated so that many replicas schedule each one once.
 */
import { sql } from 'kysely';
import { z } from 'zod';
import type { Db } from '../store/db.js';
import { defineJob, exponentialBackoff, type JobCatalogue } from './catalogue.js';
import { enqueue } from './queue.js';

/** Agent audit entries are kept this long. */
export const AUDIT_RETENTION_DAYS = 90;
/** Expired SSH tokens, keys and device logins are kept this long for the record. */
export const EXPIRED_RETENTION_DAYS = 30;

export function housekeepingJobs(db: Db) {
  return [
    defineJob({
      kind: 'audit.prune',
      payload: z.object({}),
      maxAttempts: 5,
      backoffMs: exponentialBackoff(10_000),
      async run() {
        await sql`DELETE FROM agent_actions
          WHERE at < now() - make_interval(days => ${AUDIT_RETENTION_DAYS})`.execute(db);
      },
    }),
    defineJob({
      kind: 'credentials.expire',
      payload: z.object({}),
      maxAttempts: 5,
      backoffMs: exponentialBackoff(10_000),
      async run(_payload, ctx) {
        await ctx.step('device-logins', async () => {
          await sql`DELETE FROM device_logins WHERE expires_at < now() - interval '1 day'`.execute(
            db,
          );
        });
        await ctx.step('ssh-tokens', async () => {
          await sql`DELETE FROM ssh_tokens
            WHERE expires_at < now() - make_interval(days => ${EXPIRED_RETENTION_DAYS})`.execute(
            db,
          );
        });
        await ctx.step('console-keys', async () => {
          // Console sign-ins mint a key each; expired ones are of no further use.
          await sql`DELETE FROM api_keys WHERE console AND expires_at < now() - interval '1 day'`.execute(
            db,
          );
        });
      },
    }),
  ];
}

/**
 * Enqueues each housekeeping job, and the services' periodic kinds named in `more`
 * (payload `{}`), now and then every `everyMs`; returns a stopper.
 */
export function scheduleHousekeeping(
  db: Db,
  catalogue: JobCatalogue,
  everyMs = 3_600_000,
  more: readonly string[] = [],
): () => void {
  const tick = () => {
    for (const kind of ['audit.prune', 'credentials.expire', ...more]) {
      void enqueue(db, catalogue, kind, {}, { dedupeKey: 'periodic' }).catch(() => {});
    }
  };
  tick();
  const timer = setInterval(tick, everyMs);
  timer.unref();
  return () => clearInterval(timer);
}
