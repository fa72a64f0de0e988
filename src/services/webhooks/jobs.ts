/**
 * Pruning the delivery log: finished deliveries (with their attempts) are kept
 * DELIVERY_RETENTION_DAYS, then removed, and so are events no delivery names any more.
 * A durable job, scheduled hourly with the platform's housekeeping (deduplicated, so many
 * replicas run it once).
 */
import { sql } from 'kysely';
import { z } from 'zod';
import { defineJob, exponentialBackoff } from '../../jobs/catalogue.js';
import type { Db } from '../../store/db.js';

export const DELIVERY_RETENTION_DAYS = 30;

export function webhookJobs(db: Db) {
  return [
    defineJob({
      kind: 'webhooks.prune',
      payload: z.object({}),
      maxAttempts: 5,
      backoffMs: exponentialBackoff(10_000),
      async run(_payload, ctx) {
        await ctx.step('deliveries', async () => {
          await sql`DELETE FROM webhook_deliveries WHERE status <> 'pending'
            AND finished_at < now() - make_interval(days => ${DELIVERY_RETENTION_DAYS})`.execute(
            db,
          );
        });
        await ctx.step('events', async () => {
          await sql`DELETE FROM webhook_events e
            WHERE created_at < now() - make_interval(days => ${DELIVERY_RETENTION_DAYS})
              AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = e.id)`.execute(
            db,
          );
        });
      },
    }),
  ];
}
