/**
 * The billing hook of machines: running time is booked as usage events of kind
 * `machine_running_seconds`, per organization and machine, which a later issue prices.
 * Each machine carries `metered_at`, the moment up to which its time is booked: a tick
 * books every running machine up to now, and every transition out of `running` books the
 * machine first, so no second is booked twice or lost, whatever the tick's period.
 */
import { sql } from 'kysely';
import type { Executor } from '../../store/db.js';
import type { ServiceContext } from '../context.js';

export const RUNNING_SECONDS = 'machine_running_seconds';

/** Books the running time of running machines (all, or one) up to now. */
export async function meterRunning(ex: Executor, machineId?: string): Promise<number> {
  const res = await sql`
    WITH due AS (
      SELECT id, org_id, coalesce(metered_at, ready_at, created_at) AS since FROM machines
      WHERE observed_state = 'running' AND (${machineId ?? null}::text IS NULL OR id = ${machineId ?? null})
      FOR UPDATE SKIP LOCKED),
    booked AS (
      UPDATE machines m SET metered_at = now() FROM due WHERE m.id = due.id
      RETURNING due.id, due.org_id, due.since)
    INSERT INTO usage_events (org_id, kind, quantity, subject)
    SELECT org_id, ${RUNNING_SECONDS}, round(extract(epoch FROM now() - since)::numeric, 3), id
    FROM booked WHERE now() > since`.execute(ex);
  return Number(res.numAffectedRows ?? 0);
}

/** Books every running machine every `everyMs`; returns a stopper. */
export function scheduleMetering(ctx: ServiceContext, everyMs = 60_000): () => void {
  const timer = setInterval(() => {
    meterRunning(ctx.db).catch((err: unknown) => ctx.log.warn({ err }, 'metering failed'));
  }, everyMs);
  timer.unref();
  return () => clearInterval(timer);
}
