/**
 * The billing hook of machines: running time is recorded as usage events per
 * organization and machine, of three kinds (services/billing/kinds.ts): plain running
 * seconds, and the same seconds weighted by the machine's vcpus and by its memory.
 * Each machine carries `metered_at`, the moment up to which its time is recorded: a tick
 * records every running machine up to now, and every transition out of `running` records
 * the machine first, so no second is recorded twice or lost, whatever the tick's period.
 * Each event carries the interval it measures (`since`, `at`), over which it is priced.
 * Events are written under the usage lock (services/billing/record.ts), so booking never
 * misses one. The metering tick is billing's (services/billing/jobs.ts).
 */
import { sql } from 'kysely';
import type { Executor } from '../../store/db.js';
import { withUsageLock } from '../billing/record.js';

export const RUNNING_SECONDS = 'machine_running_seconds';

/** Records the running time of running machines (all, or one) up to now. */
export async function meterRunning(ex: Executor, machineId?: string): Promise<number> {
  return withUsageLock(ex, async (tx) => {
    // The time is read after the lock is held (see record.ts), once for every row.
    const res = await sql`
      WITH t AS MATERIALIZED (SELECT clock_timestamp() AS now),
      due AS (
        SELECT id, org_id, coalesce(metered_at, ready_at, created_at) AS since,
          coalesce((config->>'vcpus')::numeric, 1) AS vcpus,
          coalesce((config->>'memoryMb')::numeric, 512) AS memory_mb
        FROM machines
        WHERE observed_state = 'running' AND (${machineId ?? null}::text IS NULL OR id = ${machineId ?? null})
        FOR UPDATE SKIP LOCKED),
      booked AS (
        UPDATE machines m SET metered_at = t.now FROM due, t WHERE m.id = due.id
        RETURNING due.id, due.org_id, due.vcpus, due.memory_mb, due.since,
          round(extract(epoch FROM t.now - due.since)::numeric, 3) AS seconds, t.now AS at)
      INSERT INTO usage_events (org_id, kind, quantity, subject, since, at)
      SELECT org_id, k.kind, k.quantity, id, since, at
      FROM booked CROSS JOIN LATERAL (VALUES
        (${RUNNING_SECONDS}, seconds),
        ('machine_vcpu_seconds', seconds * vcpus),
        ('machine_memory_gb_seconds', round(seconds * memory_mb / 1024, 6))
      ) AS k(kind, quantity)
      WHERE seconds > 0`.execute(tx);
    return Number(res.numAffectedRows ?? 0);
  });
}
